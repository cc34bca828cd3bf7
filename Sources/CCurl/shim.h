// libcurl's declarations and constants through Debian's libcurl4-openssl-dev
// headers, with no link: Trove loads libcurl.so.4 with dlopen on the first
// HTTP transfer (see LibCurl.swift), so commands that need no HTTP do not
// pay for the ~37 libraries libcurl brings in. curl_easy_setopt,
// curl_easy_getinfo and curl_multi_setopt are variadic, which Swift can
// neither type nor call: each wrapper below takes the resolved function as
// an untyped pointer, calls it through a pointer typed as variadic (as C
// requires) and fixes one argument type.
#ifndef TROVE_CCURL_SHIM_H
#define TROVE_CCURL_SHIM_H

#include <curl/curl.h>

typedef size_t (*trove_curl_data_callback)(char *, size_t, size_t, void *);
typedef int (*trove_curl_progress_callback)(void *, curl_off_t, curl_off_t, curl_off_t,
                                            curl_off_t);

typedef CURLcode (*trove_curl_easy_setopt_function)(CURL *, CURLoption, ...);
typedef CURLcode (*trove_curl_easy_getinfo_function)(CURL *, CURLINFO, ...);
typedef CURLMcode (*trove_curl_multi_setopt_function)(CURLM *, CURLMoption, ...);

static inline CURLcode trove_curl_set_long(void *setopt, CURL *handle, CURLoption option,
                                           long value) {
  return ((trove_curl_easy_setopt_function)setopt)(handle, option, value);
}
static inline CURLcode trove_curl_set_offset(void *setopt, CURL *handle, CURLoption option,
                                             curl_off_t value) {
  return ((trove_curl_easy_setopt_function)setopt)(handle, option, value);
}
static inline CURLcode trove_curl_set_string(void *setopt, CURL *handle, CURLoption option,
                                             const char *value) {
  return ((trove_curl_easy_setopt_function)setopt)(handle, option, value);
}
static inline CURLcode trove_curl_set_pointer(void *setopt, CURL *handle, CURLoption option,
                                              void *value) {
  return ((trove_curl_easy_setopt_function)setopt)(handle, option, value);
}
static inline CURLcode trove_curl_set_list(void *setopt, CURL *handle, CURLoption option,
                                           struct curl_slist *value) {
  return ((trove_curl_easy_setopt_function)setopt)(handle, option, value);
}
static inline CURLcode trove_curl_set_data_callback(void *setopt, CURL *handle,
                                                    CURLoption option,
                                                    trove_curl_data_callback value) {
  return ((trove_curl_easy_setopt_function)setopt)(handle, option, value);
}
static inline CURLcode trove_curl_set_progress_callback(void *setopt, CURL *handle,
                                                        trove_curl_progress_callback value) {
  return ((trove_curl_easy_setopt_function)setopt)(handle, CURLOPT_XFERINFOFUNCTION, value);
}
static inline CURLcode trove_curl_get_long(void *getinfo, CURL *handle, CURLINFO info,
                                           long *value) {
  return ((trove_curl_easy_getinfo_function)getinfo)(handle, info, value);
}
static inline CURLcode trove_curl_get_offset(void *getinfo, CURL *handle, CURLINFO info,
                                             curl_off_t *value) {
  return ((trove_curl_easy_getinfo_function)getinfo)(handle, info, value);
}
static inline CURLcode trove_curl_get_string(void *getinfo, CURL *handle, CURLINFO info,
                                             char **value) {
  return ((trove_curl_easy_getinfo_function)getinfo)(handle, info, value);
}

static inline CURLMcode trove_curl_multi_set_long(void *setopt, CURLM *multi,
                                                  CURLMoption option, long value) {
  return ((trove_curl_multi_setopt_function)setopt)(multi, option, value);
}

#endif
