// Internal helpers around the ncclUniqueId encoding (see wire::IdLayout).
#pragma once
#include <cstdint>
#include <string>

#include "src/bootstrap/bootstrap.h"

namespace braid {

/// Writes `info` into the 128 bytes of `id` (the inverse of bootstrapDecodeId).
void bootstrapEncodeId(const UniqueIdInfo& info, ncclUniqueId* id);
/// The secret every process derives from an NCCL_COMM_ID string (deterministic).
uint64_t bootstrapSecretFromString(const std::string& text);
/// 64 random bits (getrandom, else /dev/urandom, else clock and pid mixing).
uint64_t bootstrapRandomSecret();

}  // namespace braid
