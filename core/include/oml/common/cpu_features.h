#pragma once
// What this process's CPU can do that changes which kernels are fast: read once, from CPUID
// (GCC's and Clang's reading, which also checks that the OS saves the AVX-512 registers).

namespace oml {

/// Whether the CPU has x86's bfloat16 dot-product instructions (AVX512-BF16; every CPU with AMX
/// has them too) and the OS enables AVX-512. False off x86, where this is not read.
bool cpu_has_bf16_dot_products();

/// Whether the CPU has AMX's bfloat16 tile instructions (AMX-BF16; Intel Xeons since Sapphire
/// Rapids) and the OS enables the tile state (XCR0): oneDNN's bfloat16 GEMMs then run on tiles,
/// ~7x faster than float32 ones (docs/benchmarks.md). A hypervisor may hide them. False off x86.
bool cpu_has_amx_bf16();

/// Whether bfloat16 arithmetic is emulated on this CPU: an x86 CPU without AVX512-BF16, where
/// oneDNN and ATen run bfloat16 GEMMs and convolutions through float32 conversions, 3-25x slower
/// than float32 (docs/benchmarks.md: resnet18 and ViT-S/16 on AMD Zen 3 and an Intel Xeon without
/// it). False off x86 (not known there: ARM CPUs may have BF16).
bool cpu_emulates_bf16();

/// Whether the CPU is AMD's (x86's vendor string); false off x86. LibTorch's wheel does its
/// float32 GEMMs in MKL, which runs a slower code path on AMD CPUs (docs/benchmarks.md).
bool cpu_is_amd();

}  // namespace oml
