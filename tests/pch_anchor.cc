// Anchor of the tests' precompiled header (tests/CMakeLists.txt): an empty program
// compiled with the test executables' flags.
int main() { return 0; }
