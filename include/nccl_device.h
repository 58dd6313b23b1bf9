/* nccl_device.h: NCCL 2.30's device API, written for Braid (docs/device-api.md).
 *
 * Device communicators (ncclDevCommCreate), teams, load/store windows
 * (ncclGetLsaPointer & co.), LSA and world barriers, cooperative groups and the GIN
 * interface (declared; no GIN connections in Braid yet). The types and host functions
 * are usable from host code without nvcc; the device functions need nvcc and
 * libcu++ (<cuda/atomic>, part of the CUDA toolkit).
 */
#ifndef BRAID_NCCL_DEVICE_H_
#define BRAID_NCCL_DEVICE_H_

#include "nccl_device/utility.h"
#include "nccl_device/core.h"
#include "nccl_device/coop.h"
#include "nccl_device/ptr.h"
#include "nccl_device/lsa_barrier.h"
#include "nccl_device/gin.h"
#include "nccl_device/barrier.h"

#endif /* BRAID_NCCL_DEVICE_H_ */
