; Regions at the cursor for Python. The innermost capture containing the cursor names the region.
; boilerplate: text that continues almost deterministically (imports, signatures, scaffolding, literals)
(import_statement) @boilerplate
(import_from_statement) @boilerplate
(future_import_statement) @boilerplate
(decorator) @boilerplate
(parameters) @boilerplate
(function_definition name: (identifier) @boilerplate)
(function_definition return_type: (_) @boilerplate)
(class_definition name: (identifier) @boilerplate)
(class_definition superclasses: (argument_list) @boilerplate)
(dictionary) @boilerplate
(list) @boilerplate
(set) @boilerplate
(tuple) @boilerplate
(case_clause (case_pattern) @boilerplate)
(type) @boilerplate

; logic: statements and expressions inside bodies
(block) @logic
(expression_statement) @logic
(return_statement) @logic
(if_statement condition: (_) @logic)
(elif_clause condition: (_) @logic)
(while_statement condition: (_) @logic)
(for_statement) @logic
(with_statement) @logic
(raise_statement) @logic
(except_clause) @logic
(assert_statement) @logic
(lambda) @logic
(list_comprehension) @logic
(dictionary_comprehension) @logic
(interpolation) @logic
; an empty line inside a function body lies outside its block's span: the function is the container
(function_definition) @logic
(class_definition) @boilerplate

; comments and docstrings
(comment) @comment
(block . (expression_statement (string) @comment))
(module . (expression_statement (string) @comment))

(string) @string
