"""The pluggy markers of gridmix's plugins (project and entry-point group ``"gridmix"``), in the
lowest layer, so that a plugin module at any layer (the built-in mixers, the built-in tracks) marks
its hooks with the same ``hookimpl``. The hooks themselves are specified in
:mod:`gridmix.tracks.hookspecs`."""

import pluggy

PROJECT_NAME = "gridmix"
ENTRY_POINT_GROUP = "gridmix"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)
