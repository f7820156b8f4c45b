#pragma once
// Errors that reach an HTTP client. Every bad input becomes an ApiError carrying the HTTP status
// and the OpenAI error fields, so clients (the official SDKs included) surface it as a typed error:
//   {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}
#include <nlohmann/json_fwd.hpp>

#include <string>

#include "core/error.h"

namespace specserve::server {

class ApiError : public Error {
 public:
  ApiError(int status, std::string message, std::string type = "invalid_request_error", std::string param = "",
           std::string code = "")
      : Error(std::move(message)),
        status_(status),
        type_(std::move(type)),
        param_(std::move(param)),
        code_(std::move(code)) {}

  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const std::string& param() const { return param_; }  // "" → null in the body
  const std::string& code() const { return code_; }    // "" → null in the body

 private:
  int status_;
  std::string type_;
  std::string param_;
  std::string code_;
};

// 400 invalid_request_error naming the offending parameter.
[[noreturn]] void throw_bad_param(const std::string& param, const std::string& message);

// The OpenAI-shaped body for an error.
nlohmann::json error_body(const ApiError& e);
// Default type for a bare HTTP status (404 → not_found_error, 413 → invalid_request_error, ...).
std::string error_type_for_status(int status);
// Serialised error body for a status without a more specific message (used by the fallback handler).
std::string error_body_for_status(int status, const std::string& message);

}  // namespace specserve::server
