# Cross-compiling for arm64 (aarch64) with Debian's gcc-aarch64-linux-gnu,
# against a sysroot of Debian arm64 packages unpacked by
# scripts/cross-arm64.sh (OARBANK_ARM64_SYSROOT): its static libseccomp,
# nettle and c-ares. Header-only libraries (nlohmann-json, CLI11, Asio,
# toml++) are architecture-independent and come from this system. Programs
# (pkg-config, scdoc) run on this system; libraries are found in the
# sysroot only, never this system's x86-64 ones.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
if(NOT DEFINED OARBANK_ARM64_SYSROOT AND DEFINED ENV{OARBANK_ARM64_SYSROOT})
  set(OARBANK_ARM64_SYSROOT $ENV{OARBANK_ARM64_SYSROOT})
endif()
if(NOT OARBANK_ARM64_SYSROOT)
  message(FATAL_ERROR "OARBANK_ARM64_SYSROOT: the arm64 sysroot (scripts/cross-arm64.sh makes it)")
endif()
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES OARBANK_ARM64_SYSROOT)
set(CMAKE_FIND_ROOT_PATH ${OARBANK_ARM64_SYSROOT})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
