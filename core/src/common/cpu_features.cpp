#include "oml/common/cpu_features.h"

namespace oml {
namespace {

#if defined(__x86_64__) || defined(__i386__)
constexpr bool kX86 = true;
bool read_avx512_bf16() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16") != 0;
}
bool read_amd() {
  __builtin_cpu_init();
  return __builtin_cpu_is("amd") != 0;
}
#else
constexpr bool kX86 = false;
bool read_avx512_bf16() { return false; }
bool read_amd() { return false; }
#endif

}  // namespace

bool cpu_has_bf16_dot_products() {
  static const bool has = read_avx512_bf16();
  return has;
}

bool cpu_is_amd() {
  static const bool amd = read_amd();
  return amd;
}

bool cpu_emulates_bf16() { return kX86 && !cpu_has_bf16_dot_products(); }

}  // namespace oml
