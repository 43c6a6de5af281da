"""The lowest layer, imported by every other and importing none of them (no torch): the token grid
(:mod:`.grid`), names loaded on first use (:mod:`.lazy`), the command line's cheap checks
(:mod:`.inputs`), whole files (:mod:`.files`), signals (:mod:`.interrupt`), "did you mean" hints
(:mod:`.suggest`), the version (:mod:`.version`), the hook marker (:mod:`.markers`), shared
defaults (:mod:`.defaults`) and a record's named values as a dict (:mod:`.records`)."""
