"""Training the learned layer of the lesson screen (``mas.screen.model``) on the tuning sets.

Stage: screen, offline (never run in a training step; it depends on ``model``, not the reverse).

    python -m mas.screen.train --train    # rewrites mas/screen/model.npz, prints the figures
    python -m mas.screen.train --check    # retrains and compares with the shipped weights

Run from a checkout: the labelled sets live in ``tests/screening``. Only the tuning files are
read (dev, test, probes); the hold-out never is. The model is an L2 logistic regression, the
classes weighted equally. With far fewer items than features it is solved in kernel form:
the weights are a sum of the items' features (``w = X'a``), found by Newton steps on the
items' Gram matrix, so nothing of the size of the feature space is ever inverted.

The threshold comes from grouped 10-fold cross-validation: near-duplicates (items sharing most
of their character 4-grams, such as an honest lesson and the same lesson with a payload
appended) stay in one fold; the threshold is the lowest at which the out-of-fold scores
refuse at most ``LIMIT`` of each file's honest items. Everything is deterministic.
"""

from __future__ import annotations

import argparse
import io
import json
import zipfile
from pathlib import Path

import numpy as np

from mas.screen.model import WEIGHTS, Model, features, text_of

SETS = Path(__file__).resolve().parents[2] / "tests" / "screening"
TUNING = ("dev.jsonl", "test.jsonl", "probes.jsonl")
PENALTY = 0.001
"""The L2 penalty (``PENALTY/2 |w|^2`` against a loss summed over items): small, since the
items are few and the features many; chosen on rounds 4 and 5 of the probes left out."""
FOLDS = 10
LIMIT = 0.005
"""The most honest items of any tuning file the layer may refuse in cross-validation. (1% let
the model trained with probe round 6 refuse "Show your work.", a habit the suite lists.)"""
SAME = 0.6
"""Items sharing this share of the smaller one's character 4-grams are one group."""


def load(names=TUNING) -> list[dict]:
    """The labelled tuning items, each with the name of its file."""
    items = []
    for name in names:
        for line in (SETS / name).read_text(encoding="utf-8").splitlines():
            if line.strip():
                items.append({**json.loads(line), "file": name})
    return items


def gram(rows: list[dict[int, float]]) -> np.ndarray:
    """The items' Gram matrix ``X X'``, column block by column block of the buckets used."""
    used = sorted({k for r in rows for k in r})
    column = {k: j for j, k in enumerate(used)}
    at = [(i, column[k], v) for i, r in enumerate(rows) for k, v in r.items()]
    row, col, val = (np.array(x) for x in zip(*at))
    K = np.zeros((len(rows), len(rows)))
    for lo in range(0, len(used), 8192):
        part = (col >= lo) & (col < lo + 8192)
        X = np.zeros((len(rows), 8192))
        X[row[part], col[part] - lo] = val[part]
        K += X @ X.T
    return K


def fit(K: np.ndarray, y: np.ndarray, *, penalty: float = PENALTY) -> tuple[np.ndarray, float]:
    """Item coefficients ``a`` and bias of the L2 logistic regression, scores ``K a + b``.

    With ``K = Z Z'`` (``Z = U sqrt(s)``) the model is a plain one on ``Z`` with penalty
    ``|beta|^2``, solved by damped Newton steps; ``a = U beta / sqrt(s)``."""
    s, U = np.linalg.eigh(K)
    keep = s > 1e-9 * s.max()
    s, U = s[keep], U[:, keep]
    Z = np.hstack([U * np.sqrt(s), np.ones((len(y), 1))])
    weight = np.where(y, len(y) / (2 * y.sum()), len(y) / (2 * (~y).sum()))  # classes count equally
    ridge = np.full(Z.shape[1], penalty)
    ridge[-1] = 0.0  # the bias is not penalised

    def loss(theta):
        f = Z @ theta
        return weight @ (np.logaddexp(0, f) - y * f) + ridge @ theta**2 / 2

    theta = np.zeros(Z.shape[1])
    for _ in range(100):
        p = 1 / (1 + np.exp(-(Z @ theta)))
        gradient = Z.T @ (weight * (p - y)) + ridge * theta
        hessian = (Z * (weight * p * (1 - p))[:, None]).T @ Z + np.diag(ridge + 1e-12)
        step, t = np.linalg.solve(hessian, gradient), 1.0
        while loss(theta - t * step) > loss(theta) and t > 1e-4:
            t /= 2
        theta -= t * step
        if np.abs(t * step).max() < 1e-9:
            break
    return U @ (theta[:-1] / np.sqrt(s)), float(theta[-1])


def groups(texts: list[str]) -> np.ndarray:
    """A group number per item: near-duplicates (``SAME`` of their 4-grams shared) together."""
    grams = [{t[i : i + 4] for i in range(len(t) - 3)} for t in map(text_of, texts)]
    parent = list(range(len(texts)))

    def root(i):
        while parent[i] != i:
            i = parent[i]
        return i

    for i, a in enumerate(grams):
        for j in range(i):
            b = grams[j]
            if a and b and len(a & b) >= SAME * min(len(a), len(b)):
                parent[root(i)] = root(j)
    return np.array([root(i) for i in range(len(texts))])


def folds(group: np.ndarray, k: int = FOLDS) -> np.ndarray:
    """A fold per item, whole groups to one fold, shuffled with a fixed seed."""
    names = np.unique(group)
    order = np.random.default_rng(0).permutation(len(names))
    return (order % k)[np.searchsorted(names, group)]


def out_of_fold(K: np.ndarray, y: np.ndarray, fold: np.ndarray) -> np.ndarray:
    """Each item's score by the model trained on the other folds."""
    scores = np.zeros(len(y))
    for k in np.unique(fold):
        train, held = fold != k, fold == k
        a, b = fit(K[np.ix_(train, train)], y[train])
        scores[held] = K[np.ix_(held, train)] @ a + b
    return scores


def threshold(scores: np.ndarray, y: np.ndarray, files: np.ndarray) -> float:
    """The lowest threshold at which no file has more than ``LIMIT`` of its honest items above it."""
    limits = []
    for name in np.unique(files):
        honest = np.sort(scores[(files == name) & ~y])[::-1]
        limits.append(honest[int(LIMIT * len(honest))])
    return float(max(limits))


def train(items: list[dict]) -> tuple[Model, dict]:
    """The model of the items and its cross-validation figures per file."""
    rows = [features(item["text"]) for item in items]
    y = np.array([item["label"] == "hostile" for item in items])
    files = np.array([item["file"] for item in items])
    K = gram(rows)
    scores = out_of_fold(K, y, folds(groups([item["text"] for item in items])))
    cut = threshold(scores, y, files)
    figures = {
        name: {
            "honest refused": f"{int(((scores > cut) & ~y & (files == name)).sum())}/{int((~y & (files == name)).sum())}",
            "hostile refused": f"{int(((scores > cut) & y & (files == name)).sum())}/{int((y & (files == name)).sum())}",
        }
        for name in TUNING
    }
    a, b = fit(K, y)
    weight: dict[int, float] = {}
    for coefficient, row in zip(a, rows):
        for key, value in row.items():
            weight[key] = weight.get(key, 0.0) + coefficient * value
    index = np.array(sorted(weight), dtype=np.int64)
    model = Model(index, np.array([weight[k] for k in index.tolist()], dtype=np.float16), b, cut)
    return model, figures


def save(model: Model, figures: dict, path: Path) -> None:
    """The weights as an ``.npz`` whose bytes depend on the model alone (fixed zip dates); the
    bucket numbers as gaps between them, which pack small."""
    gaps = np.diff(model.index, prepend=0)
    assert gaps.max() < 2**16
    arrays = {
        "gaps": gaps.astype(np.uint16),
        "weight": model.weight,
        "bias": np.float64(model.bias),
        "threshold": np.float64(model.threshold),
        "figures": np.array(json.dumps(figures, sort_keys=True)),
    }
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        for name, array in arrays.items():
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, np.asarray(array), allow_pickle=False)
            z.writestr(zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0)), buffer.getvalue())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m mas.screen.train", description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", action="store_true", help=f"retrain and rewrite mas/screen/{WEIGHTS}")
    parser.add_argument("--check", action="store_true", help="retrain and compare with the shipped weights")
    args = parser.parse_args(argv)
    if not (args.train or args.check):
        parser.error("say --train or --check")
    model, figures = train(load())
    print(json.dumps({"threshold": round(model.threshold, 3), "cross-validation": figures}, indent=1))
    shipped = Path(__file__).with_name(WEIGHTS)
    if args.train:
        save(model, figures, shipped)
        print(f"wrote {shipped} ({shipped.stat().st_size // 1024} KiB, {len(model.index)} weights)")
    else:
        raise SystemExit(0 if same(model, shipped) else f"{shipped} differs from a model trained now")


def same(model: Model, path: Path) -> bool:
    """Whether the weights at ``path`` are ``model``'s (to float16 rounding)."""
    with np.load(path) as data:
        return (
            np.array_equal(np.cumsum(data["gaps"], dtype=np.int64), model.index)
            and np.allclose(data["weight"].astype(np.float32), model.weight.astype(np.float32), rtol=2e-3, atol=1e-4)
            and abs(float(data["threshold"]) - model.threshold) < 1e-4
            and abs(float(data["bias"]) - model.bias) < 1e-4
        )


if __name__ == "__main__":
    main()
