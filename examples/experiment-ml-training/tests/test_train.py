import math

import config
from train import train, val_loss


def test_training_gives_a_finite_loss():
    assert math.isfinite(val_loss(*train(config.LEARNING_RATE, config.EPOCHS)))
