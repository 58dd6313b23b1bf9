// The dispatch table of one instruction set's build of the kernels (internal to
// src/reduce). Included after kernels.h (and after any specializations of ReduceKernel /
// CopyKernel for this instruction set), inside the same BRAID_REDUCE_KERNEL_NS.
#pragma once
#ifndef BRAID_REDUCE_KERNEL_NS
#error "define BRAID_REDUCE_KERNEL_NS before including src/reduce/kernel_fill.h"
#endif
#include "src/reduce/kernels.h"

namespace braid {
namespace reduce_detail {
namespace BRAID_REDUCE_KERNEL_NS {

// ---- the dispatch table -------------------------------------------------------------

template <int T>
constexpr void fillType(KernelTable& t) {
  using Tr = TraitsOf<T>;
  constexpr int kSum = static_cast<int>(Kind::kSum);
  t.reduce[T][kSum][0][0] = &ReduceKernel<Tr, Kind::kSum, false, false>::run;
  t.reduce[T][kSum][1][0] = &ReduceKernel<Tr, Kind::kSum, true, false>::run;
  t.reduce[T][kSum][0][1] = &ReduceKernel<Tr, Kind::kSum, false, true>::run;
  t.reduce[T][kSum][1][1] = &ReduceKernel<Tr, Kind::kSum, true, true>::run;
  // Prod/max/min reducers never have pre/post steps: one kernel for all four slots.
  constexpr Kind kOthers[] = {Kind::kProd, Kind::kMax, Kind::kMin};
  constexpr ReduceFn kOtherFns[] = {&ReduceKernel<Tr, Kind::kProd, false, false>::run,
                                    &ReduceKernel<Tr, Kind::kMax, false, false>::run,
                                    &ReduceKernel<Tr, Kind::kMin, false, false>::run};
  for (int k = 0; k < 3; ++k)
    for (int pre = 0; pre < 2; ++pre)
      for (int post = 0; post < 2; ++post)
        t.reduce[T][static_cast<int>(kOthers[k])][pre][post] = kOtherFns[k];
  t.copy[T][1][0] = &CopyKernel<Tr, true, false>::run;
  t.copy[T][0][1] = &CopyKernel<Tr, false, true>::run;
  t.copy[T][1][1] = &CopyKernel<Tr, true, true>::run;
}

template <int... Ts>
constexpr KernelTable buildTable(std::integer_sequence<int, Ts...>) {
  KernelTable t;
  (fillType<Ts>(t), ...);
  return t;
}

constexpr KernelTable kTable = buildTable(std::make_integer_sequence<int, kNumTypes>{});

}  // namespace BRAID_REDUCE_KERNEL_NS
}  // namespace reduce_detail
}  // namespace braid
