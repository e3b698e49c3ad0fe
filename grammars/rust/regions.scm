; Regions at the cursor for Rust. The innermost capture containing the cursor names the region.
(use_declaration) @boilerplate
(mod_item name: (identifier) @boilerplate)
(attribute_item) @boilerplate
(parameters) @boilerplate
(type_parameters) @boilerplate
(function_item name: (identifier) @boilerplate)
(struct_item name: (_) @boilerplate)
(enum_item name: (_) @boilerplate)
(trait_item name: (_) @boilerplate)
(function_item return_type: (_) @boilerplate)
(field_declaration_list) @boilerplate
(enum_variant_list) @boilerplate
(impl_item trait: (_) @boilerplate)
(impl_item type: (_) @boilerplate)
(match_pattern) @boilerplate
(array_expression) @boilerplate
(field_initializer_list) @boilerplate
(block "}" @boilerplate)
(declaration_list "}" @boilerplate)

(block) @logic
(expression_statement) @logic
(let_declaration) @logic
(if_expression condition: (_) @logic)
(while_expression condition: (_) @logic)
(for_expression) @logic
(return_expression) @logic
(closure_expression) @logic

(line_comment) @comment
(block_comment) @comment

(string_literal) @string
(raw_string_literal) @string
