"""The CUDA toolkit from NVIDIA's pip wheels (nvidia-cuda-nvrtc, nvidia-cuda-runtime, nvidia-cuda-cccl for
CUDA 13 install into site-packages/nvidia/cu13/: include/ with the CUDA headers, include/cccl/ with CCCL,
lib/libnvrtc.so.13). The library finds NVRTC and the headers through environment variables read at run time
(ATTNJIT_NVRTC_PATH, ATTNJIT_CUDA_HOME, CUDA_HOME, else the build machine's toolkit); where none of them is
set and such a tree is importable, `import attnjit` points them at it, so that a pip-only environment
compiles kernels. Order: ATTNJIT_CUDA_HOME / CUDA_HOME, then the wheels, then the build-time toolkit."""
import os
import sys
from typing import Dict, Iterable, Optional

_SONAME = "libnvrtc.so.13"


def find_cu13(paths: Iterable[str]) -> Optional[str]:
    """The first nvidia/cu13 folder under `paths` with the headers NVRTC compiles against (cuda_fp16.h and
    CCCL's cuda/ptx) and NVRTC itself, or None."""
    for p in paths:
        home = os.path.join(p, "nvidia", "cu13")
        if (os.path.isfile(os.path.join(home, "include", "cuda_fp16.h"))
                and os.path.isfile(os.path.join(home, "include", "cccl", "cuda", "ptx"))
                and os.path.isfile(os.path.join(home, "lib", _SONAME))):
            return home
    return None


def configure_environment(environ: Dict[str, str] = os.environ, paths: Iterable[str] = sys.path) -> Optional[str]:
    """Sets ATTNJIT_CUDA_HOME and ATTNJIT_NVRTC_PATH to the wheels' tree when no toolkit is named in the
    environment; returns the tree, or None when the environment names one or no wheel tree is found."""
    if any(environ.get(k) for k in ("ATTNJIT_CUDA_HOME", "CUDA_HOME", "ATTNJIT_NVRTC_PATH")):
        return None
    home = find_cu13(paths)
    if home is not None:
        environ["ATTNJIT_CUDA_HOME"] = home
        environ["ATTNJIT_NVRTC_PATH"] = os.path.join(home, "lib", _SONAME)
    return home
