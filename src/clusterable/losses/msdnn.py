"""Placeholder."""


class MsDNNLoss:
    pass


def msdnn_autoencoder_loss():
    pass
