"""Teacher and student networks, the distillation loss, and checkpoints.

Both networks take raw ``uint8`` pixels (or floats on the same 0..255 scale) and normalise
inside ``forward``, so the wire format to the teacher service stays compact and no caller
can forget the normalisation.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from distill.data import NUM_CLASSES


def cache_dir() -> Path:
    """$HOLLOWSCALE_CACHE/distill, default ~/.cache/hollowscale/distill: the teacher checkpoints and
    PyTorch's compile cache (distill is an engine and cannot ask hollowscale.paths)."""
    base = os.environ.get("HOLLOWSCALE_CACHE") or str(Path.home() / ".cache" / "hollowscale")
    return Path(base) / "distill"


def keep_torch_caches_out_of_tmp() -> str | None:
    """Point PyTorch's compile cache (``$TORCHINDUCTOR_CACHE_DIR``) at hollowscale's cache folder
    (``$HOLLOWSCALE_CACHE/distill/torchinductor``, default under ``~/.cache/hollowscale``), unless the
    user chose one; the folder set, or None.

    Why: nothing here compiles, but importing ``torch._dynamo`` (every optimizer step does) makes the
    cache folder, by default ``<temp folder>/torchinductor_<user>``: each training left it in /tmp.  The
    variable is read when that folder is made, so this runs at this module's import, before any step.
    Where that folder cannot be made (a read-only home), torch's default stays.
    """
    if os.environ.get("TORCHINDUCTOR_CACHE_DIR"):
        return None
    folder = cache_dir() / "torchinductor"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(folder)
    return str(folder)


keep_torch_caches_out_of_tmp()

# Fashion-MNIST pixel statistics (0..255 scale), computed once from the training set.
PIXEL_MEAN = 72.94
PIXEL_STD = 90.02


@dataclass(frozen=True)
class NetConfig:
    """A plain CNN: one (conv3x3-BN-ReLU) x ``convs_per_stage`` + 2x2 max-pool per stage.

    ``channels`` lists the width of each stage; ``hidden`` is the width of the dense layer
    (0 means straight to the classifier).
    """

    channels: tuple[int, ...] = (32, 64)
    convs_per_stage: int = 1
    hidden: int = 128
    dropout: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_json(d: dict[str, Any]) -> NetConfig:
        return NetConfig(
            channels=tuple(d["channels"]),
            convs_per_stage=int(d["convs_per_stage"]),
            hidden=int(d["hidden"]),
            dropout=float(d.get("dropout", 0.0)),
        )


# The teacher is sized for >= 91% test accuracy; the student for a cheap training step.
TEACHER_CONFIG = NetConfig(channels=(32, 64), convs_per_stage=1, hidden=256, dropout=0.3)
STUDENT_CONFIG = NetConfig(channels=(16, 32), convs_per_stage=1, hidden=64, dropout=0.0)


class ConvNet(nn.Module):
    """See :class:`NetConfig`."""

    def __init__(self, cfg: NetConfig) -> None:
        super().__init__()
        self.cfg = cfg
        layers: list[nn.Module] = []
        c_in, side = 1, 28
        for c_out in cfg.channels:
            for _ in range(cfg.convs_per_stage):
                layers += [nn.Conv2d(c_in, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU()]
                c_in = c_out
            layers.append(nn.MaxPool2d(2))
            side //= 2
        self.features = nn.Sequential(*layers)
        flat = c_in * side * side
        head: list[nn.Module] = [nn.Flatten()]
        if cfg.hidden:
            head += [nn.Linear(flat, cfg.hidden), nn.ReLU()]
            if cfg.dropout:
                head.append(nn.Dropout(cfg.dropout))
            head.append(nn.Linear(cfg.hidden, NUM_CLASSES))
        else:
            head.append(nn.Linear(flat, NUM_CLASSES))
        self.head = nn.Sequential(*head)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = (x.float() - PIXEL_MEAN) / PIXEL_STD
        return self.head(self.features(x))


def distillation_loss(
    student_logits: torch.Tensor,
    teacher_logits: torch.Tensor | None,
    y: torch.Tensor,
    labelled: torch.Tensor,
    temperature: float,
    alpha: float,
) -> torch.Tensor:
    """Hinton's loss, per sample, averaged over the batch.

    Labelled sample: ``alpha*T^2*KL(p_T(teacher) || p_T(student)) + (1-alpha)*CE(y)``.
    Unlabelled sample: the soft term ``alpha*T^2*KL`` only.
    Without a teacher (pure mode) only labelled samples contribute, averaged over them, so
    the pure student is trained as well as its labels allow rather than diluted.
    """
    lab = labelled.float()
    if teacher_logits is None:
        n_lab = lab.sum().clamp(min=1.0)
        ce = F.cross_entropy(student_logits, y.clamp(min=0), reduction="none")
        return (ce * lab).sum() / n_lab
    t = temperature
    log_p_s = F.log_softmax(student_logits / t, dim=1)
    log_p_t = F.log_softmax(teacher_logits.float() / t, dim=1)
    kl = (log_p_t.exp() * (log_p_t - log_p_s)).sum(dim=1)
    ce = F.cross_entropy(student_logits, y.clamp(min=0), reduction="none")
    per_sample = alpha * t * t * kl + (1.0 - alpha) * ce * lab
    return per_sample.mean()


@dataclass
class Checkpoint:
    """What ``train-teacher`` writes: the weights plus enough metadata to trust them."""

    config: NetConfig
    state_dict: dict[str, torch.Tensor]
    meta: dict[str, Any] = field(default_factory=dict)

    def build(self) -> ConvNet:
        """An eval-mode network with these weights."""
        net = ConvNet(self.config)
        net.load_state_dict(self.state_dict)
        net.eval()
        return net


def save_checkpoint(net: ConvNet, path: Path, meta: dict[str, Any] | None = None) -> None:
    """Write atomically (tmp + rename) so a crashed training never leaves a half file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # Plain JSON types only, so the checkpoint loads with torch.load(weights_only=True).
    meta = json.loads(json.dumps(meta or {}, default=str))
    payload = {
        "format": "hollowscale.distill/v1",
        "config": net.cfg.to_json(),
        "state_dict": net.state_dict(),
        "meta": {"saved_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **meta},
    }
    tmp = path.with_suffix(path.suffix + ".tmp")
    torch.save(payload, tmp)
    tmp.replace(path)


def load_checkpoint(path: Path) -> Checkpoint:
    """Read a checkpoint written by :func:`save_checkpoint`; clear error when absent."""
    if not path.exists():
        raise FileNotFoundError(
            f"teacher checkpoint {path} not found; create it with: hollowscale distill train-teacher"
        )
    payload = torch.load(path, map_location="cpu", weights_only=True)
    if payload.get("format") != "hollowscale.distill/v1":
        raise ValueError(f"{path} is not a hollowscale distill checkpoint")
    return Checkpoint(NetConfig.from_json(payload["config"]), payload["state_dict"], payload.get("meta", {}))


@torch.inference_mode()
def evaluate(net: nn.Module, x: Any, y: Any, batch_size: int = 1000) -> float:
    """Top-1 accuracy on numpy arrays (uint8 images, int labels)."""
    was_training = net.training
    net.eval()
    correct = 0
    for i in range(0, len(x), batch_size):
        xb = torch.from_numpy(x[i : i + batch_size])
        pred = net(xb).argmax(dim=1).numpy()
        correct += int((pred == y[i : i + batch_size]).sum())
    net.train(was_training)
    return correct / max(1, len(x))
