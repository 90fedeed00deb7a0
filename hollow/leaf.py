"""Small private helpers for hollow's specs on top of :mod:`kubecore.schema`.

kubecore's leaf factories (``one_of``, ``number``) return ``Annotated`` types built at run time, which a
type checker cannot read; :func:`validator_of` takes the validator out of one, so a field can say its
precise static type (``Annotated[int, validator_of(number(0, 255, integer=True))]``) and still be
checked, and worded, exactly as kubecore words it.  :func:`leaf` turns a plain checking function into a
validator with the same wording rules (``ValueError`` -> ``expected ..., got ...`` at the field path).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, get_args

from pydantic import PlainValidator
from pydantic_core import PydanticCustomError

from kubecore.schema import problem


def validator_of(annotated: Any) -> Any:
    """The validator carried by one of :mod:`kubecore.schema`'s ``Annotated`` leaf types."""
    return get_args(annotated)[1]


def leaf(fn: Callable[[Any], Any]) -> PlainValidator:
    """A validator that runs ``fn``; its ``ValueError`` becomes one spec problem at the field."""

    def run(value: Any) -> Any:
        try:
            return fn(value)
        except PydanticCustomError:  # already one of ours (it may name a key below the field)
            raise
        except ValueError as exc:
            raise problem(str(exc)) from None

    return PlainValidator(run)
