/* The host side of NCCL 2.30's device API: now nccl_device/core.h (kept for programs
 * that include this name; nccl_device.h has the whole API). */
#ifndef BRAID_NCCL_DEVICE_HOST_H_
#define BRAID_NCCL_DEVICE_HOST_H_
#include "nccl_device/core.h"
#endif
