"""Pod lifecycle as data: which stage applies to a pod, and when it is due.

Like KWOK's stages, behaviour is a table, not code paths.  The default table ships as
``hollow/stages.yaml``; a pool may name its own file (``stages: my-stages.yaml`` in the pools file).
Each stage says which pods it selects (phase, deletion, restart policy), which delay applies (startup or
run duration, taken from the pod's ``hollowscale.io/*`` annotations or else the pool's lifecycle
defaults) and from which moment that delay counts (binding, container start, now)::

    stages:
      - name: pod-complete            # for logs (a DNS label, unique in the file)
        action: finish                # start | finish | finalize | prepare
        selector:
          phases: [Running]           # Pending, Running, Succeeded, Failed, Unknown (default: all)
          deleting: false             # true: only pods with a deletionTimestamp (default false)
          restart_policies: [OnFailure, Never]   # default: all three
          claims_prepared: true       # false: pods with resource claims not prepared yet; true: the others
        delay: run                    # none | startup | run | prepare
        anchor: run_started           # now | bound | run_started | prepared

Pods with DRA resource claims (``spec.resourceClaims``, or a claim the scheduler made for an extended
resource) are *prepared* before they start, as the kubelet calls its DRA driver's
``NodePrepareResources``: the ``prepare`` action reads each claim and succeeds once every one is
allocated and reserved for the pod (until then it is retried, and the pod stays Pending); ``prepare``
delays by the pod's ``hollowscale.io/prepare-delay`` or the pool's ``lifecycle.prepare_delay``, and the
anchor ``prepared`` is the moment the claims were prepared (the binding for a pod without claims).

The controller in :mod:`hollow.pods` only applies the first matching stage; :func:`plan` is a pure
function so timing is tested with a fake clock.  Stage files are validated like every spec
(:mod:`kubecore.schema`): unknown keys, unknown values and duplicate names are refused, every problem
reported with the file name and field path.

Anchors come from the pod object itself (PodScheduled transition, container ``startedAt``) and random
draws are keyed by the pod uid, so an agent that restarts computes the same deadlines again.

Gang members (label ``hollowscale.io/gang``, annotation ``hollowscale.io/gang-min``) wait for their
gang when the pool's or the agent's ``gang_barrier`` is on: for them ``run_started`` is the later of
the container start and the gang's barrier (:mod:`hollow.gangs`), and a stage anchored there does not
come due before the barrier is crossed.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import AfterValidator

from hollow.clock import parse_rfc3339
from hollow.probes import pod_ready_delay
from kubecore.distributions import FIXED_ZERO, FOREVER_DIST, DurationDist, keyed_uniform
from kubecore.durations import parse_go_duration
from kubecore.schema import Dist, DnsLabel, FiniteDist, Spec, number, one_of, raise_problems, validate, validator_of
from kubecore.yamlfile import load_yaml

RUN_DURATION = "hollowscale.io/run-duration"
EXIT_CODE = "hollowscale.io/exit-code"
STARTUP_DELAY = "hollowscale.io/startup-delay"
#: the time a DRA driver's NodePrepareResources takes for the pod's claims (a Go duration)
PREPARE_DELAY = "hollowscale.io/prepare-delay"
#: the gang a pod belongs to (the value of loadgen.workloads.LABEL_GANG; hollow imports only kubecore)
LABEL_GANG = "hollowscale.io/gang"
#: the number of gang members that must run before any member's run clock starts (loadgen's ANN_GANG_MIN)
ANN_GANG_MIN = "hollowscale.io/gang-min"
#: a training job's checkpoint interval in seconds, a plain decimal (loadgen's ANN_CHECKPOINT)
ANN_CHECKPOINT = "hollowscale.io/checkpoint-interval"

Action = Literal["start", "finish", "finalize", "prepare"]
Delay = Literal["none", "startup", "run", "prepare"]
Anchor = Literal["now", "bound", "run_started", "prepared"]

#: order of phases; a pod never moves backwards, so an older event cannot undo a newer one
PHASE_ORDER = {"": 0, "Pending": 0, "Unknown": 0, "Running": 1, "Succeeded": 2, "Failed": 2}
TERMINAL = frozenset({"Succeeded", "Failed"})
#: phases a selector may name (a pod without a phase yet counts as Pending)
PHASES: tuple[str, ...] = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
RESTART_POLICIES: tuple[str, ...] = ("Always", "OnFailure", "Never")
ALL_POLICIES = frozenset(RESTART_POLICIES)

#: the default table, shipped as package data next to this module
DEFAULT_STAGES_FILE = Path(__file__).parent / "stages.yaml"


_Phase = Annotated[str, validator_of(one_of(*PHASES))]
_Policy = Annotated[str, validator_of(one_of(*RESTART_POLICIES))]


def _unique(items: tuple[str, ...]) -> tuple[str, ...]:
    dups = sorted({x for x in items if items.count(x) > 1})
    if not items:
        raise_problems("selector", [((), "expected at least one value, got an empty list")])
    if dups:
        raise_problems("selector", [((), f"expected each value once, got {', '.join(map(repr, dups))} twice")])
    return items


class Selector(Spec):
    """Which pods a stage applies to (every condition must hold).

    Attributes:
        phases: pod phases (a pod without a phase yet is Pending); all phases when omitted.
        deleting: True selects only pods with a deletionTimestamp, False only pods without.
        restart_policies: ``spec.restartPolicy`` values; all three when omitted.
        claims_prepared: False selects only pods with DRA resource claims not prepared yet, True only the
            others (no claims, or prepared); None (omitted): both.
    """

    phases: Annotated[tuple[_Phase, ...], AfterValidator(_unique)] = PHASES
    deleting: bool = False
    restart_policies: Annotated[tuple[_Policy, ...], AfterValidator(_unique)] = RESTART_POLICIES
    claims_prepared: bool | None = None

    def matches(self, phase: str, deleting: bool, restart_policy: str, prepared: bool = True) -> bool:
        """True when a pod in this state is selected (``prepared``: it has no claims, or they are prepared)."""
        return deleting == self.deleting and (phase or "Pending") in self.phases \
            and restart_policy in self.restart_policies \
            and (self.claims_prepared is None or self.claims_prepared == prepared)


class Stage(Spec):
    """One row of the lifecycle table.

    Attributes:
        name: for logs (``pod-ready``, ``pod-complete``, ``pod-delete``); unique in its table.
        action: what the controller does when the stage is due: ``start`` (Pending -> Running),
            ``finish`` (the containers exit: Succeeded/Failed, or a restart in place), ``finalize``
            (terminate what still runs, then the final DELETE), ``prepare`` (the pod's DRA claims,
            checked allocated and reserved for it, as the kubelet's NodePrepareResources).
        selector: which pods the stage applies to.
        delay: which duration applies: ``none``, ``startup`` (startup delay), ``run`` (run duration) or
            ``prepare`` (prepare delay).
        anchor: the moment the delay counts from: ``now``, ``bound`` (binding), ``run_started`` (start of
            the current container run) or ``prepared`` (the claims prepared; the binding without claims).
    """

    name: DnsLabel
    action: Annotated[Action, validator_of(one_of(*get_args(Action)))]
    selector: Selector = Selector()
    delay: Annotated[Delay, validator_of(one_of(*get_args(Delay)))] = "none"
    anchor: Annotated[Anchor, validator_of(one_of(*get_args(Anchor)))] = "now"


def _unique_names(stages: tuple[Stage, ...]) -> tuple[Stage, ...]:
    first: dict[str, int] = {}
    problems: list[tuple[tuple[str | int, ...], str]] = []
    if not stages:
        problems.append(((), "expected at least one stage, got an empty list"))
    for i, stage in enumerate(stages):
        if stage.name in first:
            problems.append(((i, "name"), f"expected a name not used by an earlier stage "
                                          f"(stages[{first[stage.name]}]), got {stage.name!r}"))
        first.setdefault(stage.name, i)
    raise_problems("stages", problems)
    return stages


#: a lifecycle table: at least one stage, names unique; the first matching stage wins
StageTable = Annotated[tuple[Stage, ...], AfterValidator(_unique_names)]


class StagesFile(Spec):
    """A stages YAML file: ``{stages: [...]}``."""

    stages: StageTable


def parse_stages(doc: Any, source: str) -> tuple[Stage, ...]:
    """Validate a stages document (``{stages: [...]}``) into its table.

    Raises:
        kubecore.schema.SpecError: every problem, each naming ``source`` and the field path.
    """
    return validate(StagesFile, doc, source).stages


def load_stages(path: str | Path) -> tuple[Stage, ...]:
    """Read (strict YAML) and validate a stages file.

    Raises:
        kubecore.schema.SpecError: the file is missing, not YAML, or not a valid stages document.
    """
    return parse_stages(load_yaml(path), str(path))


@functools.cache
def default_stages() -> tuple[Stage, ...]:
    """The shipped table (``hollow/stages.yaml``), read once per process.

    Raises:
        kubecore.schema.SpecError: the package data is missing or broken (an installation problem).
    """
    return load_stages(DEFAULT_STAGES_FILE)


def stages_to_doc(stages: tuple[Stage, ...]) -> list[dict[str, Any]]:
    """The list form :func:`parse_stages` reads back (under ``stages:``)."""
    return [s.model_dump(mode="json") for s in stages]


@dataclass(frozen=True)
class PodFacts:
    """What the agent reads from a pod object (parsed once per event).

    Attributes:
        uid, namespace, name, node: identity and binding.
        phase: ``status.phase`` ('' when unset).
        deleting: has a deletionTimestamp.
        restart_policy: ``spec.restartPolicy`` (Always when unset, as the apiserver defaults).
        annotations: the ``hollowscale.io/*`` annotations only.
        bound_at: wall seconds when the pod was bound (PodScheduled transition, else creation).
        run_started_at: wall seconds the current container run started, or None.
        restart_count: restarts of the first container.
        containers: (name, image) of the app containers.
        init_containers: (name, image, restartPolicy) of the init containers ('' = run to completion).
        host_network: uses the node's network (podIP = hostIP).
        pod_ip: ``status.podIP`` or None.
        has_scheduled_condition: a PodScheduled condition exists (bare pods have none).
        gang: the value of the ``hollowscale.io/gang`` label ('' when none).
        removed_by_apiserver: deleted with grace 0 and no finalizers: the apiserver removes the object
            in the same request that marked it (a DELETED event follows at once), so the kubelet has
            nothing left to write; a status patch or DELETE would only be answered 404.
        generation: ``metadata.generation`` (the spec version the kubelet reports having seen).
        observed_generation: ``status.observedGeneration`` (0 when unset); when it equals ``generation``
            the patches leave ``observedGeneration`` out (the merge and the apiserver keep the values).
        ready_delay: seconds from container start until the containers' probes would first pass
            (:mod:`hollow.probes`); None when no container has a readiness or startup probe (Ready at start).
        has_startup_probe: some container has a startup probe (``started`` is false until Ready).
        containers_ready: the ContainersReady condition is True.
        resources: ``spec.containers[i].resources`` (the objects themselves, not copies; None when unset).
        init_resources: the same for ``spec.initContainers``.
        pod_resources: ``spec.resources`` (pod-level resources) or None.
        claims: (name in the pod, ResourceClaim name) of each DRA claim the pod uses: ``spec.resourceClaims``
            (a template's claim named by ``status.resourceClaimStatuses``, '' until the controller wrote it)
            and the claim the scheduler made for an extended resource (``status.extendedResourceClaimStatus``).
    """

    uid: str
    namespace: str
    name: str
    node: str
    phase: str
    deleting: bool
    restart_policy: str
    annotations: dict[str, str]
    bound_at: float
    run_started_at: float | None
    restart_count: int
    containers: tuple[tuple[str, str], ...]
    init_containers: tuple[tuple[str, str, str], ...]
    host_network: bool
    pod_ip: str | None
    has_scheduled_condition: bool
    gang: str = ""
    removed_by_apiserver: bool = False
    generation: int = 0
    observed_generation: int = 0
    ready_delay: float | None = None
    has_startup_probe: bool = False
    containers_ready: bool = False
    resources: tuple[dict[str, Any] | None, ...] = ()
    init_resources: tuple[dict[str, Any] | None, ...] = ()
    pod_resources: dict[str, Any] | None = None
    claims: tuple[tuple[str, str], ...] = ()


def pod_claims(spec: dict[str, Any], status: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """(name in the pod, ResourceClaim name or '') of each DRA claim a pod uses (see :class:`PodFacts`)."""
    wanted = spec.get("resourceClaims")
    extended = status.get("extendedResourceClaimStatus")
    if not wanted and not extended:
        return ()
    made = {s.get("name"): s.get("resourceClaimName") or "" for s in status.get("resourceClaimStatuses") or ()}
    out = []
    for c in wanted or ():
        name = c.get("name", "")
        if c.get("resourceClaimName"):
            out.append((name, str(c["resourceClaimName"])))
        elif name in made and not made[name]:
            continue  # the controller says no claim is needed for it
        else:
            out.append((name, made.get(name, "")))
    if extended and extended.get("resourceClaimName"):
        out.append(("", str(extended["resourceClaimName"])))
    return tuple(out)


def parse_timestamp(text: Any) -> float | None:
    """Epoch seconds of an RFC 3339 time in an object (None when absent or unreadable)."""
    if not text:
        return None
    try:
        return parse_rfc3339(str(text))
    except ValueError:
        return None


def pod_facts(obj: dict[str, Any]) -> PodFacts:
    """Extract :class:`PodFacts` from a pod JSON object."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    bound_at = None
    scheduled = False
    containers_ready = False
    for cond in status.get("conditions") or ():
        kind = cond.get("type")
        if kind == "PodScheduled":
            scheduled = True
            if cond.get("status") == "True":
                bound_at = parse_timestamp(cond.get("lastTransitionTime"))
        elif kind == "ContainersReady":
            containers_ready = cond.get("status") == "True"
    if bound_at is None:
        bound_at = parse_timestamp(meta.get("creationTimestamp")) or 0.0
    run_started = None
    restarts = 0
    statuses = status.get("containerStatuses") or ()
    if statuses:
        first = statuses[0]
        restarts = int(first.get("restartCount") or 0)
        running = (first.get("state") or {}).get("running")
        if running:
            run_started = parse_timestamp(running.get("startedAt"))
    if run_started is None and status.get("phase") == "Running":
        run_started = parse_timestamp(status.get("startTime"))
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k.startswith("hollowscale.io/")}
    labels = meta.get("labels")
    containers = spec.get("containers") or ()
    inits = spec.get("initContainers") or ()
    ready_delay, startup = pod_ready_delay(containers)
    return PodFacts(
        uid=meta.get("uid", ""),
        namespace=meta.get("namespace", ""),
        name=meta.get("name", ""),
        node=spec.get("nodeName") or "",
        phase=status.get("phase") or "",
        deleting=bool(meta.get("deletionTimestamp")),
        restart_policy=spec.get("restartPolicy") or "Always",
        annotations=annotations,
        bound_at=bound_at,
        run_started_at=run_started,
        restart_count=restarts,
        containers=tuple((c.get("name", ""), c.get("image", "")) for c in containers),
        init_containers=tuple((c.get("name", ""), c.get("image", ""), c.get("restartPolicy") or "")
                              for c in inits),
        host_network=bool(spec.get("hostNetwork")),
        pod_ip=status.get("podIP") or None,
        has_scheduled_condition=scheduled,
        gang=(labels.get(LABEL_GANG) or "") if labels else "",
        removed_by_apiserver=bool(meta.get("deletionTimestamp")) and meta.get("deletionGracePeriodSeconds") == 0
        and not meta.get("finalizers"),
        generation=int(meta.get("generation") or 0),
        observed_generation=int(status.get("observedGeneration") or 0),
        ready_delay=ready_delay,
        has_startup_probe=startup,
        containers_ready=containers_ready,
        resources=tuple([c.get("resources") for c in containers]),
        init_resources=tuple([c.get("resources") for c in inits]) if inits else (),
        pod_resources=spec.get("resources"),
        claims=pod_claims(spec, status),
    )


# ------------------------------------------------------------------------------------------------ delays

ExitCode = Annotated[int, validator_of(number(0, 255, integer=True))]
FailureExitCode = Annotated[int, validator_of(number(1, 255, integer=True))]
Fraction01 = Annotated[float, validator_of(number(0, 1))]


class LifecycleSpec(Spec):
    """Pod lifecycle defaults for one pool (pod annotations override them).

    Attributes:
        startup_delay: time from binding to Running (a finite distribution; default 0).
        run_duration: time from container start to exit (a distribution; ``forever``, the default, = never).
        exit_code: container exit code at the end of the run (0 = Succeeded).
        failure_fraction: share (0..1) of pods that exit with ``failure_exit_code`` instead.
        failure_exit_code: exit code used for that share (non-zero).
        prepare_delay: time the DRA driver's NodePrepareResources takes for a pod with claims, once they
            are allocated and reserved for it (a finite distribution; default 0).
        gang_barrier: True: a gang member's run duration counts from the moment its gang has
            ``hollowscale.io/gang-min`` members running (see :mod:`hollow.gangs`), not from its own
            start; False: from its own start (the behaviour before gangs); None (default): the agent's
            setting (:attr:`hollow.settings.AgentSettings.gang_barrier`).
    """

    startup_delay: FiniteDist = FIXED_ZERO
    run_duration: Dist = FOREVER_DIST
    exit_code: ExitCode = 0
    failure_fraction: Fraction01 = 0.0
    failure_exit_code: FailureExitCode = 1
    gang_barrier: bool | None = None
    prepare_delay: FiniteDist = FIXED_ZERO


class AnnotationError(ValueError):
    """A ``hollowscale.io/*`` annotation that cannot be used (the pool default applies instead)."""


def _annotated(facts: PodFacts, key: str, allow_forever: bool) -> float | None:
    raw = facts.annotations.get(key)
    if raw is None:
        return None
    try:
        value = parse_go_duration(raw)
    except ValueError as exc:
        raise AnnotationError(f"{facts.namespace}/{facts.name}: {key}: {exc}") from None
    if math.isinf(value) and not allow_forever:
        raise AnnotationError(f"{facts.namespace}/{facts.name}: {key}: expected a finite duration, got {raw!r}")
    return value


def startup_delay(facts: PodFacts, lifecycle: LifecycleSpec) -> float:
    """Seconds from binding to Running: annotation, else the pool's distribution (keyed by uid)."""
    try:
        value = _annotated(facts, STARTUP_DELAY, False)
    except AnnotationError:
        value = None
    return value if value is not None else lifecycle.startup_delay.sample_for(facts.uid, "startup")


def prepare_delay(facts: PodFacts, lifecycle: LifecycleSpec) -> float:
    """Seconds the claims' preparation takes: annotation, else the pool's distribution (keyed by uid)."""
    try:
        value = _annotated(facts, PREPARE_DELAY, False)
    except AnnotationError:
        value = None
    return value if value is not None else lifecycle.prepare_delay.sample_for(facts.uid, "prepare")


def run_duration(facts: PodFacts, lifecycle: LifecycleSpec) -> float:
    """Seconds a container runs (``inf`` = forever): annotation, else the pool's distribution.

    Each restart of a container (restartPolicy OnFailure) draws again, keyed by the restart count.
    """
    try:
        value = _annotated(facts, RUN_DURATION, True)
    except AnnotationError:
        value = None
    if value is not None:
        return value
    dist: DurationDist = lifecycle.run_duration
    return dist.sample_for(facts.uid, "run", str(facts.restart_count))


def exit_code(facts: PodFacts, lifecycle: LifecycleSpec) -> int:
    """The exit code at the end of the run: annotation, else the pool's (with its failure share)."""
    raw = facts.annotations.get(EXIT_CODE)
    if raw is not None:
        try:
            code = int(raw)
            if 0 <= code <= 255:
                return code
        except ValueError:
            pass
    if lifecycle.failure_fraction > 0 and keyed_uniform(facts.uid, "fail", str(facts.restart_count)) \
            < lifecycle.failure_fraction:
        return lifecycle.failure_exit_code
    return lifecycle.exit_code


def parse_gang_min(raw: str | None) -> int | None:
    """The ``hollowscale.io/gang-min`` annotation's N (an integer >= 1), or None when absent or unusable."""
    if raw is None:
        return None
    text = raw.strip()
    if not text.isdigit():
        return None
    n = int(text)
    return n if n >= 1 else None


def gang_min(facts: PodFacts) -> int | None:
    """N when the pod is a gang member (label and a usable annotation), else None."""
    return parse_gang_min(facts.annotations.get(ANN_GANG_MIN)) if facts.gang else None


def annotation_problems(facts: PodFacts) -> list[str]:
    """Messages for unusable annotations (logged once per pod; defaults apply)."""
    problems = []
    for key, forever in ((STARTUP_DELAY, False), (RUN_DURATION, True), (PREPARE_DELAY, False)):
        try:
            _annotated(facts, key, forever)
        except AnnotationError as exc:
            problems.append(str(exc))
    raw = facts.annotations.get(EXIT_CODE)
    if raw is not None and not (raw.strip().isdigit() and 0 <= int(raw) <= 255):
        problems.append(f"{facts.namespace}/{facts.name}: {EXIT_CODE}: expected an integer 0..255, got {raw!r}")
    raw = facts.annotations.get(ANN_GANG_MIN)
    if raw is not None and facts.gang and parse_gang_min(raw) is None:
        problems.append(f"{facts.namespace}/{facts.name}: {ANN_GANG_MIN}: expected an integer >= 1, got {raw!r} "
                        f"(the pod runs without a gang barrier)")
    return problems


@dataclass(frozen=True)
class Planned:
    """The next stage of a pod and its deadline (wall seconds; ``inf`` = never)."""

    stage: Stage
    due_wall: float


def select(facts: PodFacts, stages: tuple[Stage, ...] | None = None, prepared: bool = True) -> Stage | None:
    """The first stage whose selector matches the pod (``stages`` defaults to :func:`default_stages`);
    ``prepared``: the pod has no claims, or they are prepared."""
    for stage in stages if stages is not None else default_stages():
        if stage.selector.matches(facts.phase, facts.deleting, facts.restart_policy, prepared):
            return stage
    return None


def plan(facts: PodFacts, lifecycle: LifecycleSpec, now_wall: float, run_started_at: float | None = None,
         stages: tuple[Stage, ...] | None = None, gated: bool = False,
         barrier_at: float | None = None, prepared_at: float | None = None,
         run_factor: float = 1.0, work_done: float = 0.0) -> Planned | None:
    """The pod's next stage and when it is due, or None when nothing more will happen (for now).

    Args:
        facts: the pod as last observed.
        lifecycle: the pool's defaults.
        now_wall: current wall time (anchor ``now``).
        run_started_at: a more precise container start than the pod's second-resolution timestamp,
            when this process started the container itself.
        stages: the lifecycle table (the pool's; :func:`default_stages` when None).
        gated: the pod is a gang member whose work waits for its gang (:mod:`hollow.gangs`): the
            anchor ``run_started`` becomes the later of the container start and ``barrier_at``, and
            while ``barrier_at`` is None a stage anchored there does not come due (None is returned;
            the caller plans again when the gang crosses its barrier).
        barrier_at: the gang's barrier time (wall seconds), or None while it is not crossed.
        prepared_at: when this process prepared the pod's claims (wall seconds), or None (not yet, or
            the pod has none).
        run_factor: the gang's spread factor (:mod:`hollow.topology`): a gated member's run duration,
            once its gang crossed the barrier, is the drawn duration times this.
        work_done: the work (seconds) a gated member's gang saved at checkpoints before its current
            attempt (:mod:`hollow.gangs`): the member runs for the rest of its duration only.
    """
    stage = select(facts, stages, prepared=not facts.claims or prepared_at is not None)
    if stage is None:
        return None
    if gated and barrier_at is None and stage.anchor == "run_started":
        return None  # the run clock has not started: the gang is not complete
    if stage.delay == "none":
        delay = 0.0
    elif stage.delay == "startup":
        delay = startup_delay(facts, lifecycle)
    elif stage.delay == "prepare":
        delay = prepare_delay(facts, lifecycle)
    else:
        delay = run_duration(facts, lifecycle)
        if gated and barrier_at is not None:
            delay = max(0.0, delay - work_done) * run_factor
    if math.isinf(delay):
        return None
    if stage.anchor == "bound":
        anchor = facts.bound_at
    elif stage.anchor == "prepared":
        anchor = prepared_at if prepared_at is not None else facts.bound_at
    elif stage.anchor == "run_started":
        anchor = run_started_at if run_started_at is not None else (facts.run_started_at or now_wall)
        if gated and barrier_at is not None and barrier_at > anchor:
            anchor = barrier_at
    else:
        anchor = now_wall
    return Planned(stage, max(anchor + delay, now_wall))
