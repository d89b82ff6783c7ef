"""Placeholder."""


class AttractiveRepulsiveLoss:
    pass


class CosineCORELLoss:
    pass


class CrossEntropyLoss:
    pass


class GaussianCORELLoss:
    pass
