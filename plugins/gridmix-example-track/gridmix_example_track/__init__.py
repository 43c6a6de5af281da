"""An example gridmix plugin: the ``heat`` track and a depthwise-convolution baseline (see
docs/plugins.md)."""

__version__ = "0.1.0"
