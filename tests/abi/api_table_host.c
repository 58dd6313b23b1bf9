/* api_table_host <other libnccl.so.2> <libabi_table_user.so>: loads the other NCCL with
 * RTLD_GLOBAL first, then the library using Braid's table (see api_table_user.c). */
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char** argv) {
  alarm(120);
  if (argc != 3) return 2;
  if (dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL) == NULL) {
    fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
    return 1;
  }
  void* user = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
  if (user == NULL) {
    fprintf(stderr, "dlopen %s: %s\n", argv[2], dlerror());
    return 1;
  }
  int (*check)(const char*) = (int (*)(const char*))dlsym(user, "braid_table_check");
  if (check == NULL) return 1;
  /* The other library's file name (its directory varies): plain names must bind there. */
  const char* other = argv[1];
  for (const char* p = argv[1]; *p; p++)
    if (*p == '/') other = p + 1;
  return check(other);
}
