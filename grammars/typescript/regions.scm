; Regions at the cursor for TypeScript and TSX. The innermost capture containing the cursor names the region.
(import_statement) @boilerplate
(import_statement source: (string) @boilerplate)
(export_clause) @boilerplate
; a module's exports (what an export declares inside is its own: a body is logic)
(export_statement) @boilerplate
(decorator) @boilerplate
(formal_parameters) @boilerplate
(type_annotation) @boilerplate
(type_parameters) @boilerplate
(function_declaration name: (identifier) @boilerplate)
(class_declaration name: (_) @boilerplate)
(method_definition name: (_) @boilerplate)
(class_heritage) @boilerplate
; class fields: scaffolding (a function a field holds has its own regions)
(public_field_definition) @boilerplate
(interface_declaration) @boilerplate
(type_alias_declaration) @boilerplate
(enum_body) @boilerplate
(object) @boilerplate
(array) @boilerplate
(switch_case value: (_) @boilerplate)
(statement_block "}" @boilerplate)
(class_body "}" @boilerplate)

(statement_block) @logic
(expression_statement) @logic
(return_statement) @logic
(lexical_declaration) @logic
(variable_declaration) @logic
(if_statement condition: (_) @logic)
(while_statement condition: (_) @logic)
(for_statement) @logic
(arrow_function body: (_) @logic)
(throw_statement) @logic

(comment) @comment

(string) @string
(template_string) @string
; an interpolation inside a template string is an expression
(template_substitution) @logic
