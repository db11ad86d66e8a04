#include "oml/common/cpu_features.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace oml {
namespace {

#if defined(__x86_64__) || defined(__i386__)
constexpr bool kX86 = true;
bool read_avx512_bf16() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16") != 0;
}
// CPUID's AMX-BF16 bit (leaf 7, EDX bit 22), and the tile configuration and data states (XCR0
// bits 17 and 18) enabled by the OS, read with XGETBV where CPUID says the OS uses XSAVE (leaf
// 1, ECX bit 27). Not through __builtin_cpu_supports: Clang before 16 has no "amx-bf16" there.
bool read_amx_bf16() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0 || (edx & (1U << 22)) == 0) return false;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0 || (ecx & (1U << 27)) == 0) return false;
  unsigned xcr0_low = 0, xcr0_high = 0;
  __asm__ volatile("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
  constexpr unsigned kTileStates = (1U << 17) | (1U << 18);
  return (xcr0_low & kTileStates) == kTileStates;
}
bool read_amd() {
  __builtin_cpu_init();
  return __builtin_cpu_is("amd") != 0;
}
#else
constexpr bool kX86 = false;
bool read_avx512_bf16() { return false; }
bool read_amx_bf16() { return false; }
bool read_amd() { return false; }
#endif

}  // namespace

bool cpu_has_bf16_dot_products() {
  static const bool has = read_avx512_bf16();
  return has;
}

bool cpu_has_amx_bf16() {
  static const bool has = read_amx_bf16();
  return has;
}

bool cpu_is_amd() {
  static const bool amd = read_amd();
  return amd;
}

bool cpu_emulates_bf16() { return kX86 && !cpu_has_bf16_dot_products(); }

}  // namespace oml
