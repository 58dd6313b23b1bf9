// torch_braid._C: the Python face of the backend (see torch_braid/__init__.py).
#include "api.h"
#include "process_group.h"

#include <braid/braid.h>
// torch/csrc/utils/pybind.h (pybind11 with torch's holder types) rather than
// torch/extension.h, which adds the whole C++ frontend: 40 % of the compile time.
#include <torch/csrc/utils/pybind.h>

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "Braid's c10d backend";
  py::class_<torch_braid::ProcessGroupBraid, c10d::Backend,
             c10::intrusive_ptr<torch_braid::ProcessGroupBraid>>(m, "ProcessGroupBraid")
      .def("perform_nocolor_split", &torch_braid::ProcessGroupBraid::performNocolorSplit,
           py::call_guard<py::gil_scoped_release>());
  m.def("create_backend", &torch_braid::createProcessGroupBraid, py::arg("store"),
        py::arg("rank"), py::arg("size"), py::arg("timeout_seconds"),
        py::arg("group_name") = std::string(),
        py::arg("global_ranks") = std::vector<uint64_t>(),
        py::call_guard<py::gil_scoped_release>(),
        "Makes the `braid` backend of a process group (collective over the group)");
  m.def("braid_version", [] { return std::string(braidVersionString()); });
  m.def("nccl_version", [] {
    int v = 0;
    torch_braid::nccl().getVersion(&v);
    return v;
  });
  m.def("build_features", [] { return std::string(braidBuildFeatures()); });
#ifdef BRAID_TORCH_CUDA
  m.attr("cuda") = true;
#else
  m.attr("cuda") = false;
#endif
}
