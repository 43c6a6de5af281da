"""The operators the concentration mixer runs: :mod:`.tucker` (the symmetric axes' chain,
dispatching to the fused :mod:`.tucker_native` CPU kernel), :mod:`.causal` (the Toeplitz causal
factor), :mod:`.semiseparable` (the semiseparable causal factor, dispatching to
:mod:`.semiseparable_native` or :mod:`.semiseparable_chunked`), and :mod:`.native_build` (compiling
and loading the C kernels)."""
