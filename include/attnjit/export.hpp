// attnjit: ATTNJIT_API marks what the shared library exports (the library is built with hidden
// visibility: the C ABI and the public C++ API of these headers, nothing else).
#pragma once

#if defined(__GNUC__)
#define ATTNJIT_API __attribute__((visibility("default")))
#else
#define ATTNJIT_API
#endif
