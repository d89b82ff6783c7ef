"""clusterable: clustering-oriented deep metric learning."""

__version__ = "0.1.0"
