#!/usr/bin/env bash
# Installs what the build and the tests need and is missing: Debian packages (Emscripten,
# Chromium, clang's sanitizer and fuzzer runtimes, the arm64 cross compiler and qemu-user) and
# the npm dev dependencies.
# Never downloads a toolchain or browser of its own.
set -euo pipefail
cd "$(dirname "$0")/.."

# --demo: only what `make demo` needs (Emscripten for the .wasm, the npm packages that bundle
# the worker scripts), not the browsers, cross compilers and sanitizer runtimes of the tests.
demo=false; [ "${1:-}" = --demo ] && demo=true

need_apt=()
command -v emcc     >/dev/null 2>&1 || need_apt+=(emscripten)
command -v node     >/dev/null 2>&1 || need_apt+=(nodejs npm)
if ! $demo; then
  command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
  command -v clang    >/dev/null 2>&1 || need_apt+=(clang)
  # qemu-user runs the prebuilt addon on older x86 CPU models and the arm64 build (make test-arm64)
  { command -v qemu-x86_64 && command -v qemu-aarch64; } >/dev/null 2>&1 || need_apt+=(qemu-user)
  [ "$(uname -m)" != x86_64 ] || command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 \
    || need_apt+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross)   # make test-arm64
  ls /usr/lib/llvm-14/lib/clang/14*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1 \
    || need_apt+=(libclang-rt-14-dev)
  # the Vulkan loader Dawn (the 'webgpu' package, make test-webgpu) opens; its driver here is the
  # SwiftShader one Debian's chromium ships. The list is read whole first: `ldconfig -p | grep -q`
  # under pipefail fails whenever grep exits before ldconfig has written everything (SIGPIPE).
  case "$(ldconfig -p 2>/dev/null)" in *'libvulkan.so.1 '*) ;; *) need_apt+=(libvulkan1) ;; esac
fi

if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing ${need_apt[*]} (apt)"
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

if [ -f package.json ]; then
  if [ ! -d node_modules ] || [ package.json -nt node_modules ] || \
     { [ -f package-lock.json ] && [ package-lock.json -nt node_modules ]; }; then
    echo "setup: installing npm dev dependencies"
    if [ -f package-lock.json ]; then npm ci --no-audit --no-fund --loglevel=error
    else npm install --no-audit --no-fund --loglevel=error; fi
    touch node_modules
  fi
fi
