; Regions at the cursor for C++. The innermost capture containing the cursor names the region.
(preproc_include) @boilerplate
(preproc_def) @boilerplate
(preproc_function_def) @boilerplate
(using_declaration) @boilerplate
(namespace_definition name: (_) @boilerplate)
(template_parameter_list) @boilerplate
(base_class_clause) @boilerplate
(class_specifier name: (_) @boilerplate)
(struct_specifier name: (_) @boilerplate)
(parameter_list) @boilerplate
(function_declarator declarator: (_) @boilerplate)
(field_declaration_list) @boilerplate
(access_specifier) @boilerplate
(enumerator_list) @boilerplate
(initializer_list) @boilerplate
(case_statement value: (_) @boilerplate)
(compound_statement "}" @boilerplate)

(compound_statement) @logic
(expression_statement) @logic
(return_statement) @logic
(declaration) @logic
(if_statement condition: (_) @logic)
(while_statement condition: (_) @logic)
(for_statement) @logic
(for_range_loop) @logic
(lambda_expression) @logic

(comment) @comment

(string_literal) @string
(raw_string_literal) @string
(char_literal) @string
