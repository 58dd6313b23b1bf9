/* Braid's nccl_device/gin_barrier.h: GIN barriers (in barrier.h; no GIN in Braid yet). */
#ifndef BRAID_NCCL_DEVICE_GIN_BARRIER_H_
#define BRAID_NCCL_DEVICE_GIN_BARRIER_H_
#include "barrier.h"
#endif
