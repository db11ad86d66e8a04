#include "oml/config/args_check.h"

namespace oml::config {
namespace {

thread_local ArgsCheck* innermost = nullptr;

}  // namespace

ArgsCheck::ArgsCheck(ErrorList& errors) : errors_(errors), outer_(innermost) { innermost = this; }

ArgsCheck::~ArgsCheck() { innermost = outer_; }

ErrorList* ArgsCheck::errors() { return innermost == nullptr ? nullptr : &innermost->errors_; }

bool ArgsCheck::claim_reader() {
  if (innermost == nullptr || innermost->reader_claimed_) return false;
  innermost->reader_claimed_ = true;
  return true;
}

}  // namespace oml::config
