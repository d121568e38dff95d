"""Fit y = 3x + 1 by gradient descent on a fixed synthetic set and print the validation
loss as JSON: {"val_loss": ...}. Deterministic, so a change of config.py alone moves it."""

import json
import math

import config


def data(n: int, shift: float) -> list[tuple[float, float]]:
    """n points with x in [0, 1) and a little deterministic noise on y."""
    points = []
    for i in range(n):
        x = (i + shift) / n
        points.append((x, 3 * x + 1 + 0.05 * math.sin(7 * x * n)))
    return points


def train(lr: float, epochs: int) -> tuple[float, float]:
    w = b = 0.0
    points = data(50, 0)
    for _ in range(epochs):
        gw = sum(2 * (w * x + b - y) * x for x, y in points) / len(points)
        gb = sum(2 * (w * x + b - y) for x, y in points) / len(points)
        w, b = w - lr * gw, b - lr * gb
    return w, b


def val_loss(w: float, b: float) -> float:
    held_out = data(20, 0.5)
    return sum((w * x + b - y) ** 2 for x, y in held_out) / len(held_out)


if __name__ == "__main__":
    w, b = train(config.LEARNING_RATE, config.EPOCHS)
    print(json.dumps({"val_loss": round(val_loss(w, b), 6)}))
