/* Braid's nccl_device/comm.h: the device communicator (declared in core.h). */
#ifndef BRAID_NCCL_DEVICE_COMM_H_
#define BRAID_NCCL_DEVICE_COMM_H_
#include "core.h"
#endif
