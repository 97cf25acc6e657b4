// Package query parses and evaluates the filter language of SearchFlows
// (E36): a small SQL-like WHERE clause over a run's built-in fields and
// its indexed attributes, with one optional ORDER BY.
//
// # Grammar
//
//	query     = [ expr ] [ "ORDER" "BY" field [ "ASC" | "DESC" ] ]
//	expr      = and { "OR" and }
//	and       = unary { "AND" unary }
//	unary     = "NOT" unary | "(" expr ")" | predicate
//	predicate = field op literal
//	          | field [ "NOT" ] "IN" "(" literal { "," literal } ")"
//	          | field [ "NOT" ] "BETWEEN" literal "AND" literal
//	          | field "STARTS_WITH" literal
//	op        = "=" | "!=" | "<>" | "<" | "<=" | ">" | ">="
//	field     = identifier | "`" any characters but "`" "`"
//	literal   = "'" characters, '' for a quote "'" | number | TRUE | FALSE
//
// Keywords are case-insensitive; field names are not. An identifier is a
// letter or '_' followed by letters, digits, '_' and '-'. Numbers are
// decimal, optionally signed, with an optional fraction and exponent.
// An empty query (or only an ORDER BY) matches every run.
//
// # Fields and types
//
// Every field has one Type. The built-in fields are FlowId, RunId,
// FlowType, Status, ParentFlowId (KEYWORD), StartTime, CloseTime
// (DATETIME) and ActiveStepTypes (KEYWORD_ARRAY); every other field is an
// indexed key of the schema given to Parse, and an unknown field is an
// error. Literals must fit the field's type: a quoted string for KEYWORD,
// KEYWORD_ARRAY and TEXT, an integer for INT, a number for DOUBLE, TRUE or
// FALSE for BOOL, an RFC 3339 time in quotes for DATETIME; a Status
// literal must be a status name (RUNNING, COMPLETED, FAILED, CANCELED,
// TERMINATED, CONTINUED_AS_NEW; see Statuses).
//
// Operators by type: KEYWORD takes every operator; INT, DOUBLE and
// DATETIME every operator but STARTS_WITH; BOOL = and !=; KEYWORD_ARRAY =,
// != and IN (an element equals, no element equals, an element is among);
// TEXT = and != (the text holds every token of the literal, or not;
// tokens are the lower-cased runs of letters and digits). ORDER BY takes
// a field of a single-valued type (not KEYWORD_ARRAY or TEXT); without it
// runs come newest start first.
//
// # Missing values
//
// A predicate on a field the run has no value for is false, whatever the
// operator (so `Key != 'a'` matches only runs that have Key), and NOT of a
// false predicate is true (`NOT Key = 'a'` matches runs without Key too).
// CloseTime of a running run and ParentFlowId of a run that is not a
// subflow have no value. Under ORDER BY, runs without a value come last
// in either direction.
//
// # Errors
//
// A malformed query is an *Error carrying the byte offset (from 0) of the
// token where it went wrong; its message says "at position N" with N
// counted from 1, as people count columns.
package query
