"""Studies: the paired-seed harness (:mod:`.harness`), the kill-safe ledger (:mod:`.ledger`), one
training run (:mod:`.train`, with :mod:`.early_stopping` and :mod:`.precision`), the data
fingerprint (:mod:`.fingerprint`) and the executors (:mod:`.executors`, :mod:`.executors_ray`). A
whole study, through the analyses to its report, is driven from the layer above those
(:mod:`gridmix.orchestrate`, docs/design.md section 9)."""
