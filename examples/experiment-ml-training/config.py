"""The training run's hyperparameters: the one file the experiments may change."""

LEARNING_RATE = 0.01
EPOCHS = 40
