#include "amx_tiles.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include <fmt/format.h>

namespace qjoule::limits::amx {
namespace {

constexpr int kArchGetXcompPerm = 0x1022;
constexpr int kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtiledata = 18;

unsigned cpuid7_edx() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  __asm__ volatile("cpuid" : "=a"(eax), "=b"(ebx), "=c"(ecx), "=d"(edx) : "a"(7), "c"(0));
  return edx;
}

// LDTILECFG's 64-byte operand: palette 1, every tile 16 rows × 64 bytes.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

TileConfig all_tiles_16x64() {
  TileConfig c;
  for (int t = 0; t < 8; ++t) {
    c.colsb[t] = 64;
    c.rows[t] = 16;
  }
  return c;
}

// Operands of small finite values (no zeros: a unit may skip them): BF16 1/256 = 0x3b80; u8 1 and s8 1.
// The accumulators stay finite (BF16: 32 × 2^-16 a step) and do not wrap (INT8: 64 a step, < 2^31 after
// 30 million steps; a trial is under a million).
struct alignas(64) Operands {
  uint16_t bf16[16 * 32];
  uint8_t i8[16 * 64];
  Operands() {
    for (auto& v : bf16) v = 0x3b80;
    std::memset(i8, 1, sizeof i8);
  }
};

const Operands& operands() {
  static const Operands o;
  return o;
}

}  // namespace

bool has_tile() { return (cpuid7_edx() >> 24) & 1u; }
bool has_bf16() { return has_tile() && ((cpuid7_edx() >> 22) & 1u); }
bool has_int8() { return has_tile() && ((cpuid7_edx() >> 25) & 1u); }

std::string request_tile_permission() {
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0)
    return fmt::format("Linux refused the AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM: {}; it needs Linux 5.16+)",
                       std::strerror(errno));
  unsigned long granted = 0;
  if (syscall(SYS_arch_prctl, kArchGetXcompPerm, &granted) != 0 || !((granted >> kXfeatureXtiledata) & 1ul))
    return "Linux did not grant the AMX tile state (ARCH_GET_XCOMP_PERM lacks XTILEDATA)";
  return "";
}

// tdpbf16ps / tdpbusd in AT&T order: src2 (B), src1 (A), dst.
#define QJ_AMX_LOOP(op, a, b)                                                                                        \
  const TileConfig config = all_tiles_16x64();                                                                       \
  const long stride = 64;                                                                                            \
  __asm__ volatile(                                                                                                  \
      "ldtilecfg %[cfg]\n\t"                                                                                         \
      "tilezero %%tmm0\n\t tilezero %%tmm1\n\t tilezero %%tmm2\n\t tilezero %%tmm3\n\t"                              \
      "tileloadd (%[pa],%[st],1), %%tmm4\n\t tileloadd (%[pa],%[st],1), %%tmm5\n\t"                                  \
      "tileloadd (%[pb],%[st],1), %%tmm6\n\t tileloadd (%[pb],%[st],1), %%tmm7\n\t"                                  \
      "1:\n\t" op " %%tmm6, %%tmm4, %%tmm0\n\t" op " %%tmm7, %%tmm4, %%tmm1\n\t" op " %%tmm6, %%tmm5, %%tmm2\n\t" op \
      " %%tmm7, %%tmm5, %%tmm3\n\t"                                                                                  \
      "dec %[n]\n\t"                                                                                                 \
      "jnz 1b\n\t"                                                                                                   \
      "tilerelease\n\t"                                                                                              \
      : [n] "+r"(steps)                                                                                              \
      : [cfg] "m"(config), [pa] "r"(a), [pb] "r"(b), [st] "r"(stride)                                                \
      : "cc", "memory")

void bf16_loop(long steps) {
  if (steps < 1) return;
  QJ_AMX_LOOP("tdpbf16ps", operands().bf16, operands().bf16);
}

void int8_loop(long steps) {
  if (steps < 1) return;
  QJ_AMX_LOOP("tdpbusd", operands().i8, operands().i8);
}
#undef QJ_AMX_LOOP

}  // namespace qjoule::limits::amx
