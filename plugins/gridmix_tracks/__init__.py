"""gridmix's built-in tracks, each a plugin module loaded through the ``gridmix`` entry-point group.

``sequence``, ``image``, ``video`` and ``mqar`` generate their data; ``sequence-csv`` and
``image-folder`` read the user's own data once ``GRIDMIX_SEQUENCE_CSV`` or ``GRIDMIX_IMAGE_FOLDER``
(or ``gridmix run --data``) points at it, and the torchvision tracks (``mnist``, ``cifar10``, …)
read ``GRIDMIX_DATA_ROOT``; without their data they are listed as needing it (docs/plugins.md,
docs/real-data.md).
"""
