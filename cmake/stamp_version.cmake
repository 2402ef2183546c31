# SPDX-License-Identifier: GPL-3.0-or-later
# Writes OUTPUT from INPUT with the project version and the git commit of SOURCE_DIR, at every
# build rather than at configure time, so a report names the commit it was built from even after
# commits without a reconfigure. TWELLSCOPE_GIT_COMMIT in the environment overrides git: for trees
# copied without their history, where the copy's own git would name the wrong commit.
# configure_file leaves OUTPUT untouched when nothing changed, so an unchanged commit rebuilds nothing.
if(DEFINED ENV{TWELLSCOPE_GIT_COMMIT} AND NOT "$ENV{TWELLSCOPE_GIT_COMMIT}" STREQUAL "")
  set(TWELLSCOPE_GIT_COMMIT "$ENV{TWELLSCOPE_GIT_COMMIT}")
else()
  execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY "${SOURCE_DIR}"
                  OUTPUT_VARIABLE TWELLSCOPE_GIT_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(NOT TWELLSCOPE_GIT_COMMIT)
    set(TWELLSCOPE_GIT_COMMIT "unknown")
  else()
    execute_process(COMMAND git status --porcelain --untracked-files=no WORKING_DIRECTORY "${SOURCE_DIR}"
                    OUTPUT_VARIABLE dirty OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(dirty)
      string(APPEND TWELLSCOPE_GIT_COMMIT "-dirty")
    endif()
  endif()
endif()
configure_file("${INPUT}" "${OUTPUT}" @ONLY)
