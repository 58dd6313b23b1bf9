// torch_braid: Braid's NCCL API as the backend reaches it, and the type mapping.
//
// PyTorch has already loaded NVIDIA's libnccl.so.2 when this extension loads, so plain
// ncclX calls could bind to NVIDIA's functions. Every call goes through Braid's table
// (braid/api_table.h) instead; braidHostStream* names exist only in Braid.
#pragma once

#include <ATen/core/Tensor.h>  // not ATen/ATen.h (every op's declaration): faster to build
#include <braid/api_table.h>

#include <string>

namespace torch_braid {

/// Braid's NCCL API table (checked once: size and version).
const braidNcclApi_t& nccl();

/// Throws c10::DistBackendError naming the call, the rank and Braid's last error
/// (ncclGetLastError) unless r is ncclSuccess or ncclInProgress.
void check(ncclResult_t r, const char* call, ncclComm_t comm, int rank);

/// The error text for a failed call (no throw): "<call> failed on rank R: <string>: <last>".
std::string describe(ncclResult_t r, const char* call, ncclComm_t comm, int rank);

/// The NCCL type that reduces `t` elementwise, or ncclNumTypes when NCCL has none
/// (int16, uint16, complex: reductions fall back to gather-and-fold).
ncclDataType_t reductionType(at::ScalarType t);

/// Bytes of a tensor, for collectives that only move data (any dtype, as ncclUint8).
inline size_t nbytes(const at::Tensor& t) { return t.numel() * t.element_size(); }

}  // namespace torch_braid
