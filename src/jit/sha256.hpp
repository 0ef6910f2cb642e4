// SHA-256 through OpenSSL's EVP interface; hex output.
#pragma once
#include <string>
#include <string_view>

namespace attnjit::jit {
std::string sha256_hex(std::string_view data);
}
