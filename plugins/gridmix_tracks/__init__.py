"""gridmix's built-in tracks, each a plugin module loaded through the ``gridmix`` entry-point group.

``sequence``, ``image`` and ``video`` are always there; ``sequence-csv`` and ``image-folder`` add a track
on the user's own data when ``GRIDMIX_SEQUENCE_CSV`` or ``GRIDMIX_IMAGE_FOLDER`` is set (docs/plugins.md).
"""
