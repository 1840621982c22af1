# The fuzz harnesses and the code each one exercises, shared by the libFuzzer
# build (tests/fuzz) and the corpus replay tests of every build
# (tests/fuzz/replay). Sources are compiled per build so that the libFuzzer
# one can instrument them.
set(LLMLIMIT_FUZZ_DIR ${PROJECT_SOURCE_DIR}/tests/fuzz)
set(LLMLIMIT_FUZZ_HARNESSES json request path registry period tz http_head http_head_end
    reserve_scan)
# The TigerBeetle client's reply and header decoder.
set(LLMLIMIT_FUZZ_TB_DIR ${PROJECT_SOURCE_DIR}/src/tbclient)
list(APPEND LLMLIMIT_FUZZ_HARNESSES tb_reply)
set(LLMLIMIT_FUZZ_TB_SOURCES ${LLMLIMIT_FUZZ_TB_DIR}/tbc_checksum.c
    ${LLMLIMIT_FUZZ_TB_DIR}/tbc_message.c ${LLMLIMIT_FUZZ_TB_DIR}/tbc_batch.c
    ${LLMLIMIT_FUZZ_TB_DIR}/tbc_body.c)
# The gateway's handling of an upstream's answer (src/server/gateway_call.c
# calls these on the upstream's bytes): its event stream, usage, cost and
# plan, and the config the plan is made from.
list(APPEND LLMLIMIT_FUZZ_HARNESSES sse upstream_answer)
# The MCP route's JSON-RPC reading (src/gateway/gw_mcp.c, in the server sources).
list(APPEND LLMLIMIT_FUZZ_HARNESSES mcp)
set(LLMLIMIT_FUZZ_GATEWAY_DIR ${PROJECT_SOURCE_DIR}/src/gateway)
set(LLMLIMIT_FUZZ_GATEWAY_SOURCES
    ${LLMLIMIT_FUZZ_GATEWAY_DIR}/gw_config.c ${LLMLIMIT_FUZZ_GATEWAY_DIR}/gw_config_load.c
    ${LLMLIMIT_FUZZ_GATEWAY_DIR}/gw_config_decode.c
    ${LLMLIMIT_FUZZ_GATEWAY_DIR}/gw_config_mcp.c
    ${LLMLIMIT_FUZZ_GATEWAY_DIR}/gw_cost.c ${LLMLIMIT_FUZZ_GATEWAY_DIR}/gw_estimate.c
    ${LLMLIMIT_FUZZ_GATEWAY_DIR}/gw_estimate_agents.c ${LLMLIMIT_FUZZ_GATEWAY_DIR}/gw_references.c
    ${LLMLIMIT_FUZZ_GATEWAY_DIR}/gw_estimate_text.c ${LLMLIMIT_FUZZ_GATEWAY_DIR}/gw_plan.c
    ${LLMLIMIT_FUZZ_GATEWAY_DIR}/gw_secret.c ${LLMLIMIT_FUZZ_GATEWAY_DIR}/gw_sse.c
    ${LLMLIMIT_FUZZ_GATEWAY_DIR}/gw_usage.c ${LLMLIMIT_FUZZ_GATEWAY_DIR}/gw_prices.c
    ${LLMLIMIT_FUZZ_GATEWAY_DIR}/gw_gemini.c
    ${LLMLIMIT_FUZZ_GATEWAY_DIR}/gw_answer.c ${LLMLIMIT_FUZZ_GATEWAY_DIR}/gw_request.c
    ${LLMLIMIT_FUZZ_GATEWAY_DIR}/gw_dispatch.c ${PROJECT_SOURCE_DIR}/src/util/sha256.c)
# The dialects' table and files (the error shapes, estimate and usage go through it, from
# gw_dispatch.c).
file(GLOB LLMLIMIT_FUZZ_DIALECT_SOURCES CONFIGURE_DEPENDS ${LLMLIMIT_FUZZ_GATEWAY_DIR}/gw_dialect*.c)
list(APPEND LLMLIMIT_FUZZ_GATEWAY_SOURCES ${LLMLIMIT_FUZZ_DIALECT_SOURCES})

file(GLOB LLMLIMIT_FUZZ_CORE_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/core/*.c)
file(GLOB LLMLIMIT_FUZZ_MEMORY_SOURCES CONFIGURE_DEPENDS
     ${PROJECT_SOURCE_DIR}/src/backend/memory/*.c)
list(APPEND LLMLIMIT_FUZZ_MEMORY_SOURCES ${PROJECT_SOURCE_DIR}/src/backend/backend.c
     ${PROJECT_SOURCE_DIR}/src/util/slab.c)
set(LLMLIMIT_FUZZ_SERVER_SOURCES
    ${PROJECT_SOURCE_DIR}/src/util/arena.c
    ${PROJECT_SOURCE_DIR}/src/util/buffer.c
    ${PROJECT_SOURCE_DIR}/src/util/file.c
    ${PROJECT_SOURCE_DIR}/src/wire/decode.c
    ${PROJECT_SOURCE_DIR}/src/wire/decode_limits.c
    ${PROJECT_SOURCE_DIR}/src/http/http_head.c
    ${PROJECT_SOURCE_DIR}/src/http/http_chunked.c
    ${PROJECT_SOURCE_DIR}/src/wire/reserve_scan.c
    ${PROJECT_SOURCE_DIR}/src/wire/encode.c
    ${PROJECT_SOURCE_DIR}/src/gateway/gw_error.c
    ${PROJECT_SOURCE_DIR}/src/gateway/gw_mcp.c
    ${PROJECT_SOURCE_DIR}/src/gateway/gw_endpoint.c
    ${PROJECT_SOURCE_DIR}/src/util/jdoc.c
    ${PROJECT_SOURCE_DIR}/src/util/log.c
    ${PROJECT_SOURCE_DIR}/src/server/registry.c
    ${PROJECT_SOURCE_DIR}/src/server/router.c)

# One static library of everything under test, built with `options`.
function(llmlimit_fuzz_subject name)
  add_library(${name} STATIC ${LLMLIMIT_FUZZ_CORE_SOURCES} ${LLMLIMIT_FUZZ_MEMORY_SOURCES}
              ${LLMLIMIT_FUZZ_SERVER_SOURCES} ${LLMLIMIT_FUZZ_TB_SOURCES}
              ${LLMLIMIT_FUZZ_GATEWAY_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/src
                             ${PROJECT_SOURCE_DIR}/src/server ${PROJECT_SOURCE_DIR}/include
                             ${LLMLIMIT_FUZZ_TB_DIR})
  target_compile_definitions(${name} PUBLIC _GNU_SOURCE)
  target_compile_options(${name} PRIVATE ${ARGN})
  target_link_libraries(${name} PUBLIC PkgConfig::JANSSON PkgConfig::CRYPTO Threads::Threads)
endfunction()
