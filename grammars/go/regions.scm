; Regions at the cursor for Go. The innermost capture containing the cursor names the region.
(package_clause) @boilerplate
(import_declaration) @boilerplate
(import_spec path: (_) @boilerplate)
(parameter_list) @boilerplate
(function_declaration name: (identifier) @boilerplate)
(function_declaration result: (_) @boilerplate)
(method_declaration receiver: (parameter_list) @boilerplate)
(method_declaration name: (field_identifier) @boilerplate)
(method_declaration result: (_) @boilerplate)
(type_declaration) @boilerplate
; a package's constants: tables of names and values (iota enumerations); a function's are logic (its block)
(source_file (const_declaration) @boilerplate)
(literal_value) @boilerplate
(expression_case value: (_) @boilerplate)
(block "}" @boilerplate)

(block) @logic
(expression_statement) @logic
(return_statement) @logic
(short_var_declaration) @logic
(var_declaration) @logic
(assignment_statement) @logic
(if_statement condition: (_) @logic)
(for_statement) @logic
(go_statement) @logic
(defer_statement) @logic

(comment) @comment

(interpreted_string_literal) @string
(raw_string_literal) @string
