/* Built with `pkg-config --cflags --libs attnjit` against the installed prefix. */
#include <attnjit/attnjit.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char** argv) {
  const char* v = attnjit_version();
  printf("c consumer %s\n", v);
  return argc > 1 && strcmp(argv[1], v) != 0;
}
