"""ddpdoctor: find what is wrong with distributed PyTorch training."""

__version__ = "0.1.0"
