"""Deterministic training of the decoder on the KJV training split, and its checkpoint format.

Seeded model init, seeded batch sampling and dropout, AdamW with warm-up and cosine decay, bf16
autocast on GPU (fp32 on CPU). The checkpoint kept is the one with the lowest loss on the
calibration split, measured every ``eval_every`` steps; the evaluation split is never read here.
GPU kernels with atomics (attention backward) can still make the last bits differ between runs.

Checkpoint directory: ``model.pt`` (config + fp32 state dict), ``vocab.json``, ``train_log.json``.
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from .data import SplitTokens, fixed_windows, load_splits, random_batch
from .model import DecoderLM, ModelConfig
from .tokenizer import Vocabulary


@dataclass(frozen=True)
class TrainConfig:
    """Training budget and optimiser settings; the defaults train in about a minute on an H200.

    1500 steps x 32 x 256 tokens = 12.3M tokens, ~15 passes over the 0.80M training tokens;
    dropout and the calibration-loss checkpoint choice keep the over-fitting in check.
    """

    steps: int = 1500
    batch_size: int = 32
    seq_len: int = 256
    lr: float = 6e-4
    min_lr_ratio: float = 0.1
    warmup_steps: int = 100
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    eval_every: int = 100
    eval_windows: int = 128
    seed: int = 0

    def __post_init__(self):
        if min(self.steps, self.batch_size, self.seq_len, self.eval_every, self.eval_windows) < 1:
            raise ValueError(f"steps, batch_size, seq_len, eval_every, eval_windows must be >= 1: {self}")


def learning_rate(step: int, cfg: TrainConfig) -> float:
    """Linear warm-up to ``lr``, then cosine decay to ``lr * min_lr_ratio`` at the last step."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    progress = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
    cosine = 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
    return cfg.lr * (cfg.min_lr_ratio + (1.0 - cfg.min_lr_ratio) * cosine)


def _optimizer(model: DecoderLM, cfg: TrainConfig, device: torch.device) -> torch.optim.AdamW:
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(0.9, 0.95),
                             fused=device.type == "cuda")


def _autocast(device: torch.device):
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return torch.autocast("cpu", enabled=False)


@torch.no_grad()
def mean_loss(model: DecoderLM, tokens: torch.Tensor, seq_len: int, batch_size: int,
              max_windows: int, device: torch.device) -> float:
    """Mean next-token cross entropy (nats) over the first ``max_windows`` fixed windows."""
    was_training = model.training
    model.eval()
    inputs, targets = fixed_windows(tokens, seq_len, max_windows=max_windows)
    total, count = 0.0, 0
    for x, y in zip(inputs.split(batch_size), targets.split(batch_size)):
        with _autocast(device):
            logits = model(x.to(device))
        total += float(F.cross_entropy(logits.float().flatten(0, 1), y.to(device).flatten(),
                                       reduction="sum"))
        count += y.numel()
    model.train(was_training)
    return total / count


def train_model(splits: SplitTokens, model_cfg: ModelConfig, cfg: TrainConfig,
                device: torch.device) -> tuple[DecoderLM, dict]:
    """Train from a seeded init; return the best-calibration-loss model and the training log."""
    torch.manual_seed(cfg.seed)
    model = DecoderLM(model_cfg).to(device)
    optimizer = _optimizer(model, cfg, device)
    generator = torch.Generator().manual_seed(cfg.seed)
    history: list[dict[str, float]] = []
    best: dict[str, Any] = {"loss": math.inf, "step": 0, "state": None}
    model.train()
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for step in range(cfg.steps):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, cfg)
        x, y = random_batch(splits.train, cfg.batch_size, cfg.seq_len, generator)
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        with _autocast(device):
            logits = model(x)
        loss = F.cross_entropy(logits.float().flatten(0, 1), y.flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        optimizer.step()
        last = step + 1 == cfg.steps
        if (step + 1) % cfg.eval_every == 0 or last:
            calib = mean_loss(model, splits.calibration, cfg.seq_len, cfg.batch_size,
                              cfg.eval_windows, device)
            history.append({"step": step + 1, "train_loss": loss.item(),
                            "calibration_loss": calib, "lr": learning_rate(step, cfg),
                            "elapsed_s": time.perf_counter() - start})
            print(f"step {step + 1:5d}  train {loss.item():.4f}  calibration {calib:.4f}  "
                  f"({history[-1]['elapsed_s']:.1f} s)", flush=True)
            if calib < best["loss"]:
                best = {"loss": calib, "step": step + 1,
                        "state": {k: v.detach().to("cpu", copy=True)
                                  for k, v in model.state_dict().items()}}
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    model.load_state_dict(best["state"])
    model.eval()
    log = {
        "train_config": asdict(cfg),
        "model_config": model_cfg.to_dict(),
        "device": str(torch.cuda.get_device_name(device)) if device.type == "cuda" else "cpu",
        "precision": "bf16 autocast" if device.type == "cuda" else "fp32",
        "train_seconds": seconds,
        "tokens_seen": cfg.steps * cfg.batch_size * cfg.seq_len,
        "tokens_per_second": cfg.steps * cfg.batch_size * cfg.seq_len / seconds,
        "selected_step": best["step"],
        "selected_calibration_loss": best["loss"],
        "selection_rule": "lowest calibration-split loss; the evaluation split is never read",
        "history": history,
        "data": splits.summary(),
    }
    return model, log


def save_checkpoint(out_dir: str | Path, model: DecoderLM, vocab: Vocabulary, log: dict) -> Path:
    """Write ``model.pt``, ``vocab.json`` and ``train_log.json`` into ``out_dir``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().float().cpu() for k, v in model.state_dict().items()}
    torch.save({"config": model.cfg.to_dict(), "state_dict": state}, out_dir / "model.pt")
    vocab.save(out_dir / "vocab.json")
    (out_dir / "train_log.json").write_text(json.dumps(log, indent=2))
    return out_dir


def load_checkpoint(ckpt_dir: str | Path, device: torch.device | str = "cpu",
                    ) -> tuple[DecoderLM, Vocabulary, dict]:
    """Model (fp32, eval mode, on ``device``), vocabulary and training log from a checkpoint."""
    ckpt_dir = Path(ckpt_dir)
    if not (ckpt_dir / "model.pt").is_file():
        raise ValueError(f"{ckpt_dir} holds no model.pt; run 'python -m profkit.kernels.int8 train' first")
    blob = torch.load(ckpt_dir / "model.pt", map_location="cpu", weights_only=True)
    model = DecoderLM(ModelConfig(**blob["config"]))
    model.load_state_dict(blob["state_dict"])
    log = json.loads((ckpt_dir / "train_log.json").read_text())
    return model.to(device).eval(), Vocabulary.load(ckpt_dir / "vocab.json"), log


def run_training(text_path: str | Path, out_dir: str | Path, train_cfg: TrainConfig | None = None,
                 model_overrides: dict | None = None, max_vocab: int = 16384,
                 device: str | None = None) -> dict:
    """Load the corpus, train, save the checkpoint; returns the training log."""
    from .corpus import corpus_identity

    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    train_cfg = train_cfg or TrainConfig()
    splits = load_splits(text_path, max_vocab=max_vocab)
    model_cfg = ModelConfig(vocab_size=len(splits.vocab), max_seq_len=train_cfg.seq_len,
                            **(model_overrides or {}))
    model, log = train_model(splits, model_cfg, train_cfg, dev)
    log.update(corpus_identity(text_path))
    save_checkpoint(out_dir, model, splits.vocab, log)
    return log
