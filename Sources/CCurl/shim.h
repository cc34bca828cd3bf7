// libcurl through Debian's libcurl4-openssl-dev. curl_easy_setopt and
// curl_easy_getinfo are variadic, which Swift cannot call: the wrappers
// below fix one argument type each.
#include <curl/curl.h>

typedef size_t (*trove_curl_data_callback)(char *, size_t, size_t, void *);
typedef int (*trove_curl_progress_callback)(void *, curl_off_t, curl_off_t, curl_off_t,
                                            curl_off_t);

static inline CURLcode trove_curl_set_long(CURL *handle, CURLoption option, long value) {
  return curl_easy_setopt(handle, option, value);
}
static inline CURLcode trove_curl_set_offset(CURL *handle, CURLoption option, curl_off_t value) {
  return curl_easy_setopt(handle, option, value);
}
static inline CURLcode trove_curl_set_string(CURL *handle, CURLoption option, const char *value) {
  return curl_easy_setopt(handle, option, value);
}
static inline CURLcode trove_curl_set_pointer(CURL *handle, CURLoption option, void *value) {
  return curl_easy_setopt(handle, option, value);
}
static inline CURLcode trove_curl_set_list(CURL *handle, CURLoption option,
                                           struct curl_slist *value) {
  return curl_easy_setopt(handle, option, value);
}
static inline CURLcode trove_curl_set_data_callback(CURL *handle, CURLoption option,
                                                    trove_curl_data_callback value) {
  return curl_easy_setopt(handle, option, value);
}
static inline CURLcode trove_curl_set_progress_callback(CURL *handle,
                                                        trove_curl_progress_callback value) {
  return curl_easy_setopt(handle, CURLOPT_XFERINFOFUNCTION, value);
}
static inline CURLcode trove_curl_get_long(CURL *handle, CURLINFO info, long *value) {
  return curl_easy_getinfo(handle, info, value);
}
static inline CURLcode trove_curl_get_offset(CURL *handle, CURLINFO info, curl_off_t *value) {
  return curl_easy_getinfo(handle, info, value);
}
static inline CURLcode trove_curl_get_string(CURL *handle, CURLINFO info, char **value) {
  return curl_easy_getinfo(handle, info, value);
}

static inline CURLMcode trove_curl_multi_set_long(CURLM *multi, CURLMoption option, long value) {
  return curl_multi_setopt(multi, option, value);
}
