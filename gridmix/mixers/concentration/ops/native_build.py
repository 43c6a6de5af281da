"""Build and load the fused native kernels (``tucker_native.c``, ``semiseparable_native.c``,
``householder_native.c``), and their one switch.

The kernels are compiled once per machine and source with the system C compiler (``$CC``, default
``cc``) into one library in ``$GRIDMIX_CACHE_DIR`` (default ``~/.cache/gridmix``), in about a
second. Beside each library its manifest (``NAME.so.json``) records the library's size and sha256; a
cached library is loaded only when it matches them, and one that does not (truncated, damaged, its
manifest missing) is rebuilt with one warning saying what was wrong, so a damaged cache never
crashes the process that loads it (:func:`check_cached`). Builders of the same cache take turns (an
``flock`` on ``.build.lock`` in it) and each file is written whole or not at all. The build tries
:data:`ATTEMPTS` in order (``-march=native -fopenmp``, then without OpenMP, then a generic ``-O3``)
and keeps the first that compiles; ``GRIDMIX_NATIVE_FLAGS`` replaces that list with one set of flags
(for example ``"-march=x86-64-v3 -fopenmp"`` for an AVX2 build on an AVX-512 machine). The vector
width follows what the compiler targets (``native_simd.h``: 16 float lanes with AVX-512, 8 with
AVX/AVX2, 4 with NEON or SSE, 1 otherwise); :func:`native_build_info` says what was built, as
``gridmix info`` prints it. A build without OpenMP splits each call over torch's threads from Python
(:func:`run_parallel`), with the same results.

Where nothing compiles, gridmix warns once, naming the ``error:`` line of the last attempt, and uses
the torch-op paths (the same results to float32 rounding, slower). The kernels are used unless
``GRIDMIX_NATIVE=0`` is set or :func:`gridmix.mixers.switches.set_native` says otherwise (as timm's
``set_fused_attn``); :mod:`gridmix.mixers.concentration.ops.tucker_native`,
:mod:`gridmix.mixers.concentration.ops.semiseparable_native` and
:mod:`gridmix.mixers.concentration.ops.householder_native` define the ops that call them.
"""

from __future__ import annotations

import ctypes
import dataclasses
import fcntl
import functools
import hashlib
import json
import os
import platform
import shlex
import shutil
import subprocess
import tempfile
import warnings
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from gridmix.core.files import write_atomic
from gridmix.mixers.switches import native_enabled

# The files the kernels are built from, beside this module: the C sources compiled into one library
# and the header they include. The one list of them: a wheel ships every .c and .h here
# (pyproject.toml's package-data), and a test checks that this list and that folder agree.
SOURCES = ("tucker_native.c", "semiseparable_native.c", "householder_native.c")
HEADERS = ("native_simd.h",)
COMMON_FLAGS = ("-O3", "-shared", "-fPIC", "-std=gnu11")
ATTEMPTS = (
    ("-march=native", "-fopenmp"),
    ("-march=native",),
    (),
)  # tried in order; the first that builds is kept
MAX_AXES = 8  # MAX_AXES in the C source


@dataclasses.dataclass(frozen=True)
class NativeBuild:
    """What the kernels were built with: the compiler and its first version line, the flags of the
    attempt that built, the vector ISA and its float lanes (``native_simd.h``), whether OpenMP
    threads them, the library's path, the attempts that failed before it (each its flags and the
    compiler's ``error:`` line), and what the cache held (``cache``: the library verified, built, or
    rebuilt and why; not part of the build's identity)."""

    compiler: str
    compiler_version: str
    flags: tuple[str, ...]
    isa: str
    lanes: int
    openmp: bool
    path: str
    failed_attempts: tuple[str, ...] = ()
    cache: str = dataclasses.field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.lanes not in (1, 4, 8, 16):
            raise ValueError(f"NativeBuild(lanes={self.lanes}); expected 1, 4, 8 or 16")

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


class NativeBuildError(RuntimeError):
    """No attempt compiled: the message names the last attempt's flags and its compiler ``error:``
    line."""


@functools.cache
def _cpuinfo_fields() -> dict[str, str]:
    """Each ``/proc/cpuinfo`` key's first value (the first CPU's), read once per process; empty
    where there is none."""
    fields: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, colon, value = line.partition(":")
            if colon:
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    return fields


def _cpuinfo(*keys: str) -> str | None:
    """The ``/proc/cpuinfo`` value of the first of ``keys`` it has, or ``None`` (not Linux)."""
    fields = _cpuinfo_fields()
    return next((fields[key] for key in keys if key in fields), None)


def _cpu_flags() -> str:
    """The host's CPU feature flags (``-march=native`` code is only valid on a CPU that has
    them)."""
    return _cpuinfo("flags", "Features") or platform.processor()


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``; ``platform.processor()`` elsewhere), as figures
    record it."""
    return _cpuinfo("model name") or platform.processor() or platform.machine()


# (CPU feature flag, ISA name), widest first: x86's /proc/cpuinfo flags, then AArch64's "Features"
# (asimd is NEON)
VECTOR_ISAS = (
    ("avx512f", "avx512f"),
    ("avx2", "avx2"),
    ("avx", "avx"),
    ("sse4_2", "sse4.2"),
    ("sse2", "sse2"),
    ("asimd", "neon"),
    ("neon", "neon"),
)
# the environment variables that switch gridmix's kernels, or hold them or torch's to a narrower ISA
# or other threads
ISA_ENVIRONMENT = (
    "GRIDMIX_NATIVE",
    "GRIDMIX_NATIVE_FLAGS",
    "MKL_ENABLE_INSTRUCTIONS",
    "ATEN_CPU_CAPABILITY",
    "OMP_NUM_THREADS",
    "OMP_WAIT_POLICY",
)


def vector_isa(flags: str, machine: str = "") -> str:
    """The widest vector ISA among CPU feature ``flags`` (:data:`VECTOR_ISAS`); on a 64-bit Arm
    ``machine``, whose every CPU has NEON, ``"neon"`` where the flags do not say; ``"unknown"``
    otherwise."""
    present = set(flags.split())
    found = next((name for flag, name in VECTOR_ISAS if flag in present), None)
    if found is None and machine.lower() in ("arm64", "aarch64"):
        return "neon"
    return found or "unknown"


def cpu_facts() -> dict:
    """What a figure measured on this CPU records: its model name, x86 family and model (which tell,
    for example, an AMD Zen 3 from a Zen 4 of the same name), the widest vector ISA the CPU has
    (``cpu_isa``, which may be wider than the kernels' build), the ISA torch's own CPU kernels run
    (``torch_cpu_capability``) and the environment variables that hold either to a narrower one
    (``isa_environment``)."""
    family, model = _cpuinfo("cpu family"), _cpuinfo("model")
    return dict(
        cpu=cpu_name(),
        cpu_model=f"family {family}, model {model}" if family and model else None,
        cpu_isa=vector_isa(_cpu_flags(), platform.machine()),
        torch_cpu_capability=torch.backends.cpu.get_cpu_capability(),
        isa_environment={name: os.environ[name] for name in ISA_ENVIRONMENT if name in os.environ},
    )


def cpu_line(facts: Mapping) -> str:
    """:func:`cpu_facts` in one line, as reports and benchmark tables print it."""
    model = f" ({facts['cpu_model']})" if facts.get("cpu_model") else ""
    held = "".join(
        f", {name}={value}" for name, value in (facts.get("isa_environment") or {}).items()
    )
    return (
        f"{facts['cpu']}{model}, CPU {facts.get('cpu_isa')}, torch kernels "
        f"{facts.get('torch_cpu_capability')}{held}"
    )


def _attempts() -> tuple[tuple[str, ...], ...]:
    """The flag sets to try: ``GRIDMIX_NATIVE_FLAGS`` alone where it is set, else
    :data:`ATTEMPTS`."""
    chosen = os.environ.get("GRIDMIX_NATIVE_FLAGS")
    return (tuple(shlex.split(chosen)),) if chosen is not None else ATTEMPTS


def error_line(output: str) -> str:
    """The compiler's first ``error:`` line (the one that says what went wrong), else its last
    non-empty line."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return next((line for line in lines if "error:" in line), lines[-1] if lines else "no output")


def cache_dir() -> Path:
    return Path(os.environ.get("GRIDMIX_CACHE_DIR") or Path.home() / ".cache" / "gridmix")


def manifest_path(library: Path) -> Path:
    """Where the size and sha256 of a cached library are kept: ``NAME.so.json`` beside it."""
    return library.with_name(library.name + ".json")


def _fingerprint(library: Path) -> dict:
    data = library.read_bytes()
    return {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def check_cached(library: Path) -> str | None:
    """``None`` when the cached ``library`` has the size and sha256 its manifest records; else what
    is wrong with it, as a phrase completing "the cached library …" (checked before it is ever
    loaded: mapping a truncated library crashes the process with SIGBUS)."""
    manifest = manifest_path(library)
    if not manifest.exists():
        return f"has no manifest {manifest.name} recording its size and sha256 (unverifiable)"
    try:
        recorded = json.loads(manifest.read_text())
        size, digest = int(recorded["size"]), str(recorded["sha256"])
    except (OSError, ValueError, KeyError, TypeError) as error:
        return f"has an unreadable manifest {manifest.name} ({type(error).__name__}: {error})"
    try:
        found = _fingerprint(library)
    except OSError as error:
        return f"cannot be read ({error.strerror or error})"
    if found["size"] != size:
        return (
            f"is {found['size']:,} bytes where its manifest records {size:,} (truncated or damaged)"
        )
    if found["sha256"] != digest:
        return (
            f"has sha256 {found['sha256'][:12]}… where its manifest records {digest[:12]}… "
            "(damaged)"
        )
    return None


def _cache_lock(cache: Path):
    """An exclusive ``flock`` on ``cache/.build.lock`` (blocking): builders and checkers of the
    cache take turns."""
    handle = open(cache / ".build.lock", "a")
    fcntl.flock(handle, fcntl.LOCK_EX)
    return handle


def compile_library(compiler: str, flags: tuple[str, ...], version: str) -> tuple[Path, str]:
    """The kernels compiled with ``flags``, from the cache where a verified library is there
    (:func:`check_cached`), else compiled into it; returns the library's path and what the cache
    held (``NativeBuild.cache``). Raises :class:`NativeBuildError` with the compiler's error line.

    The library is cached by source, flags, compiler and CPU (a failure is not: the next process
    tries again, so a compiler fixed in between is used). A cached library that fails its check is
    rebuilt, with one warning saying what was wrong. Concurrent builders take turns under the
    cache's lock; the library is compiled under a temporary name and renamed into place, then its
    manifest is written (whole or not at all).
    """
    here = Path(__file__).parent
    sources = [here / name for name in SOURCES]
    source = b"\0".join(path.read_bytes() for path in (*sources, *(here / h for h in HEADERS)))
    key = hashlib.sha256(
        b"\0".join([source, " ".join(flags).encode(), version.encode(), _cpu_flags().encode()])
    )
    cache = cache_dir()
    target = cache / f"gridmix_native-{key.hexdigest()[:16]}.so"
    cache.mkdir(parents=True, exist_ok=True)
    with _cache_lock(cache):
        problem = check_cached(target) if target.exists() else None
        if target.exists() and problem is None:
            recorded = json.loads(manifest_path(target).read_text())
            return (
                target,
                f"verified (sha256 {recorded['sha256'][:12]}…, {recorded['size']:,} bytes)",
            )
        with tempfile.TemporaryDirectory(dir=cache) as tmp:
            built = Path(tmp) / target.name
            command = [compiler, *COMMON_FLAGS, *flags, *map(str, sources), "-o", str(built)]
            result = subprocess.run(command, capture_output=True, text=True)
            if result.returncode != 0:
                raise NativeBuildError(
                    f"{compiler} {' '.join(flags) or '-O3'} exited with {result.returncode}: "
                    f"{error_line(result.stderr + result.stdout)}"
                )
            fingerprint = _fingerprint(built)
            # never a new library beside an old manifest
            manifest_path(target).unlink(missing_ok=True)
            os.replace(built, target)
            write_atomic(manifest_path(target), json.dumps(fingerprint) + "\n")
    if problem is None:
        return (
            target,
            f"built now (sha256 {fingerprint['sha256'][:12]}…, {fingerprint['size']:,} bytes)",
        )
    warnings.warn_explicit(
        f"gridmix: the cached native library {target} {problem}; rebuilt it",
        RuntimeWarning,
        filename=__name__,
        lineno=0,
    )
    return target, f"rebuilt: the cached library {problem}"


def _load(path: Path) -> ctypes.CDLL:
    """Open a built library and declare its entry points' argument types."""
    library = ctypes.CDLL(str(path))
    i64, ptr, cint = ctypes.c_int64, ctypes.c_void_p, ctypes.c_int
    ptrs, i64s = ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int64)
    head = [cint, i64, i64, i64s, i64s, i64s, i64, i64]  # d, first, last, axes, n, r, S0, heads
    fw, bw = library.gm_tucker_forward, library.gm_tucker_backward
    fw.argtypes = [*head, ptr, ptrs, ptr, ptrs, ptr, ptr, ptrs, ptr, cint]
    bw.argtypes = [*head, ptr, ptr, ptrs, ptr, ptrs, ptr, ptr, ptrs, ptr, ptrs, ptr, ptr, i64, cint]
    fw.restype = bw.restype = None
    # P, n, Q, C, r, groups, parts, first, last items
    scan = [i64, i64, i64, i64, cint, i64, i64, i64, i64]
    library.gm_semiseparable_forward.argtypes = [*scan, ptr, ptr, ptr, ptr, cint]
    library.gm_semiseparable_backward.argtypes = [*scan, *[ptr] * 8, i64, cint]
    library.gm_semiseparable_forward.restype = library.gm_semiseparable_backward.restype = None
    basis = [i64, i64, i64, i64, ptr, ptr]  # k, m, r, n, weights, DCT (or NULL)
    library.gm_householder_forward.argtypes = [*basis, ptr, ptr]
    library.gm_householder_backward.argtypes = [*basis, ptr, ptr, ptr]
    library.gm_householder_forward.restype = library.gm_householder_backward.restype = None
    library.gm_native_isa.restype = ctypes.c_char_p
    library.gm_native_lanes.restype = library.gm_native_openmp.restype = ctypes.c_int
    return library


def build(compiler: str | None = None) -> tuple[ctypes.CDLL, NativeBuild]:
    """Build (or take from the cache) and load the kernels: the first of :func:`_attempts` that
    compiles.

    Raises :class:`NativeBuildError` when there is no compiler or no attempt compiles, naming the
    last error.
    """
    compiler = compiler or os.environ.get("CC", "cc")
    if shutil.which(compiler) is None:
        raise NativeBuildError(f"no C compiler {compiler!r} on PATH")
    try:
        version = subprocess.run(
            [compiler, "--version"], capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError) as error:
        raise NativeBuildError(f"{compiler} --version failed: {error}") from None
    failures: list[str] = []
    for flags in _attempts():
        try:
            path, cache = compile_library(compiler, flags, version)
        except NativeBuildError as error:
            failures.append(str(error))
            continue
        library = _load(path)
        info = NativeBuild(
            compiler=compiler,
            compiler_version=(version.splitlines() or [""])[0],
            flags=flags,
            isa=library.gm_native_isa().decode(),
            lanes=library.gm_native_lanes(),
            openmp=bool(library.gm_native_openmp()),
            path=str(path),
            failed_attempts=tuple(failures),
            cache=cache,
        )
        return library, info
    raise NativeBuildError(failures[-1])


@functools.cache
def _built() -> tuple[ctypes.CDLL, NativeBuild] | None:
    try:
        return build()
    except (OSError, NativeBuildError) as error:
        warnings.warn_explicit(
            f"gridmix: the fused native kernels are unavailable ({error}); using torch ops "
            "(same results, slower)",
            RuntimeWarning,
            filename=__name__,
            lineno=0,
        )
        return None


def native_library() -> ctypes.CDLL | None:
    """The compiled kernels, or ``None`` (with one warning saying why) when they cannot be built;
    ignores the switch."""
    built = _built()
    return built[0] if built else None


def native_build_info() -> NativeBuild | None:
    """What :func:`native_library` was built with (building it on first call), or ``None`` when it
    could not be."""
    built = _built()
    return built[1] if built else None


def forget_library() -> None:
    """Forget the loaded library, so the next call builds or loads again (after the environment
    changed)."""
    _built.cache_clear()


def native_lanes() -> int:
    """The float lanes of one vector in the loaded kernels (0 when none is loaded)."""
    info = native_build_info()
    return info.lanes if info else 0


@functools.cache
def _pool(workers: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=workers, thread_name_prefix="gridmix-native")


def run_parallel(call: Callable[[int, int, int, int], None], items: int, threads: int) -> None:
    """Run ``call(first, last, slot, threads)`` over the work items ``[0, items)`` on ``threads``
    threads.

    With OpenMP the kernel threads itself: one call over every item, slots 0 … threads-1 taken
    inside. Without it, the items are cut into ``threads`` contiguous ranges, each one call with
    ``threads=1`` and scratch slot ``k``: the first on the calling thread, the others on pool
    threads (ctypes releases the GIL). Each item is computed the same way either way, so the results
    are.
    """
    info = native_build_info()
    threads = max(1, min(threads, items))
    if threads == 1 or (info is not None and info.openmp):
        call(0, items, 0, threads)
        return
    bounds = [items * k // threads for k in range(threads + 1)]
    futures = [
        _pool(threads - 1).submit(call, bounds[k], bounds[k + 1], k, 1) for k in range(1, threads)
    ]
    call(bounds[0], bounds[1], 0, 1)
    for future in futures:
        future.result()


def pointer(tensor: torch.Tensor, offset: int = 0) -> ctypes.c_void_p:
    """The address of a contiguous float32 tensor (plus ``offset`` floats), as the kernels take it
    (raw float32)."""
    assert tensor.is_contiguous() and tensor.dtype == torch.float32
    return ctypes.c_void_p(tensor.data_ptr() + 4 * offset)


def assume_constant_result(fn: Callable) -> Callable:
    """``torch.compiler.assume_constant_result`` without its import of ``torch._dynamo`` (1.2 s in
    every process, each training worker's included): it marks ``fn`` the same way (a test checks
    that the two agree)."""
    fn._dynamo_marked_constant = True
    return fn


# torch.compile takes the verdict as a constant instead of tracing the build
@assume_constant_result
def native_available() -> bool:
    """Whether the kernels are switched on (:func:`native_enabled`) and built and loaded (building
    it on first call)."""
    return native_enabled() and native_library() is not None


def describe() -> str:
    """The build in a few lines, as ``gridmix info`` prints it."""
    info = native_build_info()
    if info is None:
        return "native kernels: not built (see the warning above); torch ops are used"
    lines = [
        f"native kernels: {info.isa}, {info.lanes} float lanes, "
        f"{'OpenMP' if info.openmp else 'no OpenMP (split over torch threads)'}",
        f"  compiler: {info.compiler} ({info.compiler_version})",
        f"  flags: {' '.join((*COMMON_FLAGS, *info.flags))}",
        f"  library: {info.path}",
        f"  cache: {info.cache}",
    ]
    lines += [f"  failed before it: {error}" for error in info.failed_attempts]
    if not native_enabled():
        lines.append("  switched off (GRIDMIX_NATIVE=0 or set_native(False)): torch ops are used")
    return "\n".join(lines)
