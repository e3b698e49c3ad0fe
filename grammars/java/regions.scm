; Regions at the cursor for Java. The innermost capture containing the cursor names the region.
(package_declaration) @boilerplate
(import_declaration) @boilerplate
(marker_annotation) @boilerplate
(annotation) @boilerplate
(formal_parameters) @boilerplate
(throws) @boilerplate
(method_declaration name: (identifier) @boilerplate)
(constructor_declaration name: (identifier) @boilerplate)
(superclass) @boilerplate
(super_interfaces) @boilerplate
(field_declaration) @boilerplate
(enum_body) @boilerplate
(array_initializer) @boilerplate
(switch_label) @boilerplate
(block "}" @boilerplate)
(class_body "}" @boilerplate)

(block) @logic
(expression_statement) @logic
(return_statement) @logic
(local_variable_declaration) @logic
(if_statement condition: (_) @logic)
(while_statement condition: (_) @logic)
(for_statement) @logic
(enhanced_for_statement) @logic
(throw_statement) @logic
(lambda_expression) @logic

(line_comment) @comment
(block_comment) @comment

(string_literal) @string
