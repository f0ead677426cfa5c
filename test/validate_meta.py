#!/usr/bin/python3
"""Check a META.json against the PGXN Meta Spec, version 1.0.0.

Usage: test/validate_meta.py [META.json]

The spec (https://pgxn.org/spec/) is written out below as a JSON Schema
(draft 2020-12) and checked with Debian's python3-jsonschema, offline: the
required fields, the types (Term, Tag, Version, Version Range, URI, License
String), the keys each map may have, and custom keys only as "x_..." or
"X_...".  Prints one line per problem, then "META.json is valid" or
"META.json is NOT valid"; exits 0 when valid, 1 when not, 2 when the file
cannot be read as JSON.
"""

import json
import re
import sys

import jsonschema

# SemVer 2.0.0: three integers without leading zeros, an optional pre-release
# and an optional build part.
_IDENT = r"(?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)"
_SEMVER = (r"(?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*)"
           r"(?:-" + _IDENT + r"(?:\." + _IDENT + r")*)?"
           r"(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?")
# A Version Range: 0, a version (at least it), or an operator and a version,
# several joined by commas.
_RANGE_ITEM = r"(?:0|(?:(?:[<>]=?|==|!=)\s*)?" + _SEMVER + r")"
_CONTROL = r"\x00-\x1f\x7f-\x9f"

LICENSES = [
    "agpl_3", "apache_1_1", "apache_2_0", "artistic_1", "artistic_2", "bsd",
    "freebsd", "gfdl_1_2", "gfdl_1_3", "gpl_1", "gpl_2", "gpl_3", "lgpl_2_1",
    "lgpl_3_0", "mit", "mozilla_1_0", "mozilla_1_1", "openssl", "perl_5",
    "postgresql", "qpl_1_0", "ssleay", "sun", "zlib",
    "open_source", "restricted", "unrestricted", "unknown",
]

CUSTOM = {"^[xX]_": True}          # custom keys: any value

SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "PGXN Meta Spec 1.0.0",
    "type": "object",
    "required": ["name", "abstract", "version", "maintainer", "license",
                 "provides", "meta-spec"],
    "properties": {
        "name": {"$ref": "#/$defs/term"},
        "abstract": {"$ref": "#/$defs/string"},
        "version": {"$ref": "#/$defs/version"},
        "maintainer": {"$ref": "#/$defs/string_list"},
        "license": {
            "title": "license (a License String, a list of them, or a map "
                     "of license names to URIs)",
            "oneOf": [
                {"$ref": "#/$defs/license_string"},
                {"type": "array", "minItems": 1,
                 "items": {"$ref": "#/$defs/license_string"}},
                {"type": "object", "minProperties": 1,
                 "propertyNames": {"minLength": 1},
                 "additionalProperties": {"$ref": "#/$defs/uri"}},
            ],
        },
        "provides": {
            "type": "object",
            "minProperties": 1,
            "propertyNames": {"$ref": "#/$defs/term"},
            "additionalProperties": {
                "type": "object",
                "required": ["file", "version"],
                "properties": {
                    "file": {"$ref": "#/$defs/path"},
                    "version": {"$ref": "#/$defs/version"},
                    "abstract": {"$ref": "#/$defs/string"},
                    "docfile": {"$ref": "#/$defs/path"},
                },
                "patternProperties": CUSTOM,
                "additionalProperties": False,
            },
        },
        "meta-spec": {
            "type": "object",
            "required": ["version"],
            "properties": {
                "version": {"title": "meta-spec version this checker knows",
                            "const": "1.0.0"},
                "url": {"$ref": "#/$defs/uri"},
            },
            "patternProperties": CUSTOM,
            "additionalProperties": False,
        },
        "description": {"$ref": "#/$defs/string"},
        "generated_by": {"$ref": "#/$defs/string"},
        "tags": {
            "oneOf": [
                {"$ref": "#/$defs/tag"},
                {"type": "array", "items": {"$ref": "#/$defs/tag"}},
            ],
        },
        "no_index": {
            "type": "object",
            "properties": {
                "file": {"$ref": "#/$defs/path_list"},
                "directory": {"$ref": "#/$defs/path_list"},
            },
            "patternProperties": CUSTOM,
            "additionalProperties": False,
        },
        "prereqs": {
            "type": "object",
            "propertyNames": {
                "title": "prereq phase (configure, build, test, runtime, "
                         "develop or x_...)",
                "pattern": "^(?:configure|build|test|runtime|develop|[xX]_.*)$",
            },
            "additionalProperties": {
                "type": "object",
                "propertyNames": {
                    "title": "prereq relationship (requires, recommends, "
                             "suggests, conflicts or x_...)",
                    "pattern": "^(?:requires|recommends|suggests|conflicts|[xX]_.*)$",
                },
                "additionalProperties": {
                    "type": "object",
                    "propertyNames": {"$ref": "#/$defs/term"},
                    "additionalProperties": {"$ref": "#/$defs/version_range"},
                },
            },
        },
        "release_status": {"enum": ["stable", "testing", "unstable"]},
        "resources": {
            "type": "object",
            "properties": {
                "homepage": {"$ref": "#/$defs/uri"},
                "bugtracker": {
                    "type": "object",
                    "properties": {
                        "web": {"$ref": "#/$defs/uri"},
                        "mailto": {"title": "e-mail address",
                                   "type": "string", "pattern": "@"},
                    },
                    "patternProperties": CUSTOM,
                    "additionalProperties": False,
                },
                "repository": {
                    "type": "object",
                    "properties": {
                        "url": {"$ref": "#/$defs/uri"},
                        "web": {"$ref": "#/$defs/uri"},
                        "type": {"title": "lowercase string",
                                 "type": "string", "minLength": 1,
                                 "pattern": "^[^A-Z]*$"},
                    },
                    "patternProperties": CUSTOM,
                    "additionalProperties": False,
                },
            },
            "patternProperties": {"^[xX]_": {"$ref": "#/$defs/string"}},
            "additionalProperties": False,
        },
    },
    "patternProperties": CUSTOM,
    "additionalProperties": False,
    "$defs": {
        "string": {"title": "String (not empty)",
                   "type": "string", "minLength": 1},
        "string_list": {
            "oneOf": [
                {"$ref": "#/$defs/string"},
                {"type": "array", "minItems": 1,
                 "items": {"$ref": "#/$defs/string"}},
            ],
        },
        "term": {"title": "Term (2 or more characters, no space, control "
                          "character, / or \\)",
                 "type": "string",
                 "pattern": r"^[^\s/\\" + _CONTROL + r"]{2,}$"},
        "tag": {"title": "Tag (1 to 255 characters, no control character, "
                         "/ or \\)",
                "type": "string",
                "pattern": r"^[^/\\" + _CONTROL + r"]{1,255}$"},
        "version": {"title": "Version (a semantic version, e.g. 1.2.0)",
                    "type": "string", "pattern": "^" + _SEMVER + "$"},
        "version_range": {
            "title": "Version Range (0, a version, or operators and versions "
                     "joined by commas, e.g. \">= 1.2.0, < 2.0.0\")",
            "oneOf": [
                {"type": "integer", "const": 0},
                {"type": "string",
                 "pattern": r"^\s*" + _RANGE_ITEM
                            + r"(?:\s*,\s*" + _RANGE_ITEM + r")*\s*$"},
            ],
        },
        "uri": {"title": "URI (scheme://authority...)",
                "type": "string",
                "pattern": r"^[A-Za-z][A-Za-z0-9+.-]*://[^/?#\s]+[^\s]*$"},
        "path": {"title": "relative path with unix conventions",
                 "type": "string", "minLength": 1,
                 "pattern": r"^(?!/)[^\\]+$"},
        "path_list": {
            "oneOf": [
                {"$ref": "#/$defs/path"},
                {"type": "array", "items": {"$ref": "#/$defs/path"}},
            ],
        },
        "license_string": {"title": "License String",
                           "type": "string", "enum": LICENSES},
    },
}


def _no_duplicate_keys(pairs):
    seen = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError("duplicate key %r" % key)
        seen[key] = value
    return seen


def _branch_error(error):
    """The error of the alternative of a oneOf that fits the value's type."""
    by_branch = {}
    for sub in error.context:
        by_branch.setdefault(sub.schema_path[0], []).append(sub)
    fitting = [subs for subs in by_branch.values()
               if not any(e.validator == "type" and not e.relative_path
                          for e in subs)]
    if len(fitting) != 1:
        return None
    return jsonschema.exceptions.best_match(fitting[0])


def _unknown_keys(error):
    """The keys of a map that neither the spec nor the x_ rule allow."""
    known = error.schema.get("properties", {})
    patterns = error.schema.get("patternProperties", {})
    return [k for k in error.instance
            if k not in known and not any(re.search(p, k) for p in patterns)]


def _describe(error, parent_title=None):
    """Where and what is wrong, in the spec's words."""
    title = error.schema.get("title") if isinstance(error.schema, dict) else None
    title = title or parent_title
    if error.validator == "oneOf" and error.context:
        sub = _branch_error(error)
        if sub is not None:
            return _describe(sub, title)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        keys = ", ".join(json.dumps(k) for k in _unknown_keys(error))
        what = ("unknown key %s (not in the spec; custom keys must begin "
                "with x_ or X_)" % keys)
    elif error.validator in ("oneOf", "pattern", "const", "enum", "type",
                             "minLength", "minItems") and title:
        what = "%s is not a valid %s" % (json.dumps(error.instance), title)
    elif error.validator == "oneOf":
        what = "%s is not of any form the spec allows here" % json.dumps(error.instance)
    else:
        what = error.message
    return "/" + "/".join(str(p) for p in error.absolute_path), what


def main(argv):
    path = argv[1] if len(argv) > 1 else "META.json"
    try:
        with open(path, encoding="utf-8") as f:
            meta = json.load(f, object_pairs_hook=_no_duplicate_keys)
    except (OSError, ValueError) as e:
        print("%s: cannot read as JSON: %s" % (path, e))
        print("%s is NOT valid" % path)
        return 2

    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    validator = jsonschema.Draft202012Validator(SCHEMA)
    errors = sorted(validator.iter_errors(meta),
                    key=lambda e: [str(p) for p in e.absolute_path])
    for error in errors:
        print("%s: %s: %s [PGXN Meta Spec 1.0.0]" % ((path,) + _describe(error)))
    if errors:
        print("%s is NOT valid" % path)
        return 1
    print("%s is valid" % path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
